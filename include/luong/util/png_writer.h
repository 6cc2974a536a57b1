#pragma once
// A small RGB raster with text, written as PNG through zlib: enough for loss curves and attention
// heat maps without a graphics library.
#include <cstdint>
#include <string>
#include <vector>

namespace luong {

struct Rgb {
  std::uint8_t r = 0, g = 0, b = 0;
};

class Canvas {
 public:
  Canvas(int width, int height, Rgb background = {255, 255, 255});

  int width() const { return width_; }
  int height() const { return height_; }
  void set(int x, int y, Rgb color);
  Rgb get(int x, int y) const;
  void fill_rect(int x, int y, int w, int h, Rgb color);
  void line(int x0, int y0, int x1, int y1, Rgb color);
  /// Printable ASCII in an 8x14 monospace font; other bytes are drawn as '?'. `vertical` draws
  /// bottom-to-top (for rotated axis labels). Returns the width (or height) used.
  int text(int x, int y, const std::string& ascii, Rgb color, bool vertical = false);
  static int text_width(const std::string& ascii);
  static int text_height();

  /// Writes the canvas as an 8-bit RGB PNG, atomically. Throws luong::Error on failure.
  void save_png(const std::string& path) const;

 private:
  int width_;
  int height_;
  std::vector<std::uint8_t> pixels_;
};

/// The "Blues" colour ramp of the seed's heat map, for v in [0, 1].
Rgb blues(double v);

}  // namespace luong
