#include "luong/util/png_writer.h"

#include <zlib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <ostream>

#include "luong/util/atomic_file.h"
#include "luong/util/error.h"

namespace luong {
namespace {

#include "bitmap_font.inc"

void put_u32(std::string& out, std::uint32_t v) {
  out.push_back(static_cast<char>(v >> 24));
  out.push_back(static_cast<char>(v >> 16));
  out.push_back(static_cast<char>(v >> 8));
  out.push_back(static_cast<char>(v));
}

void put_chunk(std::string& out, const char* type, const std::string& data) {
  put_u32(out, static_cast<std::uint32_t>(data.size()));
  const std::string body = std::string(type, 4) + data;
  out += body;
  put_u32(out, static_cast<std::uint32_t>(
                   ::crc32(0L, reinterpret_cast<const Bytef*>(body.data()), static_cast<uInt>(body.size()))));
}

std::uint8_t mix(std::uint8_t from, std::uint8_t to, int coverage) {
  return static_cast<std::uint8_t>((from * (255 - coverage) + to * coverage) / 255);
}

}  // namespace

Canvas::Canvas(int width, int height, Rgb background)
    : width_(width), height_(height), pixels_(static_cast<std::size_t>(width) * height * 3) {
  fill_rect(0, 0, width, height, background);
}

void Canvas::set(int x, int y, Rgb c) {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return;
  const std::size_t i = (static_cast<std::size_t>(y) * width_ + x) * 3;
  pixels_[i] = c.r;
  pixels_[i + 1] = c.g;
  pixels_[i + 2] = c.b;
}

Rgb Canvas::get(int x, int y) const {
  if (x < 0 || y < 0 || x >= width_ || y >= height_) return {};
  const std::size_t i = (static_cast<std::size_t>(y) * width_ + x) * 3;
  return {pixels_[i], pixels_[i + 1], pixels_[i + 2]};
}

void Canvas::fill_rect(int x, int y, int w, int h, Rgb c) {
  for (int yy = std::max(0, y); yy < std::min(height_, y + h); ++yy) {
    for (int xx = std::max(0, x); xx < std::min(width_, x + w); ++xx) set(xx, yy, c);
  }
}

void Canvas::line(int x0, int y0, int x1, int y1, Rgb c) {
  const int dx = std::abs(x1 - x0), sx = x0 < x1 ? 1 : -1;
  const int dy = -std::abs(y1 - y0), sy = y0 < y1 ? 1 : -1;
  int err = dx + dy;
  while (true) {
    set(x0, y0, c);
    if (x0 == x1 && y0 == y1) break;
    const int e2 = 2 * err;
    if (e2 >= dy) err += dy, x0 += sx;
    if (e2 <= dx) err += dx, y0 += sy;
  }
}

int Canvas::text_width(const std::string& ascii) { return static_cast<int>(ascii.size()) * kGlyphWidth; }
int Canvas::text_height() { return kGlyphHeight; }

int Canvas::text(int x, int y, const std::string& ascii, Rgb color, bool vertical) {
  int pen = 0;
  for (char ch : ascii) {
    const int code = (ch >= 32 && ch < 127) ? ch - 32 : '?' - 32;
    for (int gy = 0; gy < kGlyphHeight; ++gy) {
      for (int gx = 0; gx < kGlyphWidth; ++gx) {
        const int coverage = kGlyphs[code][gy][gx];
        if (coverage == 0) continue;
        // Vertical text runs upwards from (x, y): glyph rows become columns.
        const int px = vertical ? x + gy : x + pen + gx;
        const int py = vertical ? y - pen - gx : y + gy;
        const Rgb under = get(px, py);
        set(px, py, {mix(under.r, color.r, coverage), mix(under.g, color.g, coverage), mix(under.b, color.b, coverage)});
      }
    }
    pen += kGlyphWidth;
  }
  return pen;
}

void Canvas::save_png(const std::string& path) const {
  std::string raw;
  raw.reserve(static_cast<std::size_t>(height_) * (width_ * 3 + 1));
  for (int y = 0; y < height_; ++y) {
    raw.push_back('\0');  // filter type: none
    raw.append(reinterpret_cast<const char*>(&pixels_[static_cast<std::size_t>(y) * width_ * 3]),
               static_cast<std::size_t>(width_) * 3);
  }
  uLongf compressed_size = ::compressBound(static_cast<uLong>(raw.size()));
  std::string compressed(compressed_size, '\0');
  if (::compress2(reinterpret_cast<Bytef*>(compressed.data()), &compressed_size,
                  reinterpret_cast<const Bytef*>(raw.data()), static_cast<uLong>(raw.size()), Z_DEFAULT_COMPRESSION) != Z_OK) {
    throw Error(path + ": PNG compression failed");
  }
  compressed.resize(compressed_size);

  std::string png("\x89PNG\r\n\x1a\n", 8);
  std::string header;
  put_u32(header, static_cast<std::uint32_t>(width_));
  put_u32(header, static_cast<std::uint32_t>(height_));
  header += std::string("\x08\x02\x00\x00\x00", 5);  // 8-bit RGB, deflate, no interlace
  put_chunk(png, "IHDR", header);
  put_chunk(png, "IDAT", compressed);
  put_chunk(png, "IEND", "");
  write_file_atomically(path, [&](std::ostream& out) { out.write(png.data(), static_cast<std::streamsize>(png.size())); });
}

Rgb blues(double v) {
  // matplotlib's Blues colormap at nine evenly spaced stops, linearly interpolated.
  static const std::array<Rgb, 9> stops = {{{247, 251, 255}, {222, 235, 247}, {198, 219, 239}, {158, 202, 225},
                                           {107, 174, 214}, {66, 146, 198}, {33, 113, 181}, {8, 81, 156},
                                           {8, 48, 107}}};
  v = std::clamp(std::isfinite(v) ? v : 0.0, 0.0, 1.0) * (stops.size() - 1);
  const auto i = std::min<std::size_t>(static_cast<std::size_t>(v), stops.size() - 2);
  const double f = v - static_cast<double>(i);
  const auto lerp = [f](std::uint8_t a, std::uint8_t b) { return static_cast<std::uint8_t>(std::lround(a + (b - a) * f)); };
  return {lerp(stops[i].r, stops[i + 1].r), lerp(stops[i].g, stops[i + 1].g), lerp(stops[i].b, stops[i + 1].b)};
}

}  // namespace luong
