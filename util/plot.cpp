#include "luong/util/plot.h"

#include <cairo.h>
#include <pango/pangocairo.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ostream>

#include "luong/util/atomic_file.h"
#include "luong/util/error.h"

namespace luong {
namespace {

constexpr const char* kFont = "DejaVu Sans, Noto Sans Arabic, Noto Sans";
constexpr double kFontSize = 10;
constexpr double kTitleSize = 12;
const Color kBlack{0, 0, 0};
const Color kGrid{0.85, 0.85, 0.85};

struct TextSize {
  double width = 0, height = 0;
};

// One pango layout of `text` at `size` points; every script shaped in its own direction.
PangoLayout* make_layout(cairo_t* cr, const std::string& text, double size) {
  PangoLayout* layout = pango_cairo_create_layout(cr);
  PangoFontDescription* font = pango_font_description_from_string(kFont);
  pango_font_description_set_absolute_size(font, size * PANGO_SCALE);
  pango_layout_set_font_description(layout, font);
  pango_font_description_free(font);
  pango_layout_set_text(layout, text.c_str(), -1);
  return layout;
}

TextSize measure(cairo_t* cr, const std::string& text, double size = kFontSize) {
  PangoLayout* layout = make_layout(cr, text, size);
  int w = 0, h = 0;
  pango_layout_get_pixel_size(layout, &w, &h);
  g_object_unref(layout);
  return {static_cast<double>(w), static_cast<double>(h)};
}

enum class Align { kLeft, kCenter, kRight };

// Draws `text` anchored at (x, y): horizontally by `align`, vertically centred. With `vertical` the
// text runs bottom to top (a quarter turn) and the same rules hold in the turned frame.
void draw_text(cairo_t* cr, const std::string& text, double x, double y, Align align, double size = kFontSize,
               bool vertical = false, Color color = kBlack) {
  PangoLayout* layout = make_layout(cr, text, size);
  int w = 0, h = 0;
  pango_layout_get_pixel_size(layout, &w, &h);
  cairo_save(cr);
  cairo_set_source_rgb(cr, color.r, color.g, color.b);
  cairo_translate(cr, x, y);
  if (vertical) cairo_rotate(cr, -M_PI / 2);
  const double dx = align == Align::kLeft ? 0 : align == Align::kCenter ? -w / 2.0 : -static_cast<double>(w);
  cairo_move_to(cr, dx, -h / 2.0);
  pango_cairo_show_layout(cr, layout);
  cairo_restore(cr);
  g_object_unref(layout);
}

void fill(cairo_t* cr, const Rect& r, Color c) {
  cairo_set_source_rgb(cr, c.r, c.g, c.b);
  cairo_rectangle(cr, r.x, r.y, r.width, r.height);
  cairo_fill(cr);
}

void stroke_line(cairo_t* cr, double x0, double y0, double x1, double y1, Color c, double width = 1) {
  cairo_set_source_rgb(cr, c.r, c.g, c.b);
  cairo_set_line_width(cr, width);
  cairo_move_to(cr, x0, y0);
  cairo_line_to(cr, x1, y1);
  cairo_stroke(cr);
}

// Ticks at 1, 2 or 5 times a power of ten, about `count` of them, covering [lo, hi].
std::vector<double> nice_ticks(double lo, double hi, int count) {
  const double raw = (hi - lo) / std::max(count, 1);
  const double magnitude = std::pow(10.0, std::floor(std::log10(raw)));
  double step = magnitude;
  for (const double m : {1.0, 2.0, 5.0, 10.0}) {
    step = m * magnitude;
    if (step >= raw) break;
  }
  std::vector<double> ticks;
  for (double t = std::ceil(lo / step - 1e-9) * step; t <= hi + step * 1e-9; t += step) ticks.push_back(std::abs(t) < step * 1e-9 ? 0 : t);
  return ticks;
}

std::string tick_text(double v) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g", v);
  return text;
}

std::string bounded(const std::string& text) { return text.size() > 200 ? text.substr(0, 200) : text; }

}  // namespace

Color blues(double v) {
  // matplotlib's Blues, sampled at nine points.
  static const double stops[9][3] = {{247, 251, 255}, {222, 235, 247}, {198, 219, 239}, {158, 202, 225}, {107, 174, 214},
                                     {66, 146, 198},  {33, 113, 181},  {8, 81, 156},    {8, 48, 107}};
  v = std::isfinite(v) ? std::clamp(v, 0.0, 1.0) : 0.0;
  const double position = v * 8;
  const int i = std::min(7, static_cast<int>(position));
  const double f = position - i;
  const auto mix = [&](int k) { return (stops[i][k] * (1 - f) + stops[i + 1][k] * f) / 255.0; };
  return {mix(0), mix(1), mix(2)};
}

struct Figure::Impl {
  cairo_surface_t* surface = nullptr;
  cairo_t* cr = nullptr;
};

Figure::Figure(int width, int height) : impl_(std::make_unique<Impl>()) {
  if (width < 1 || height < 1 || width > 16384 || height > 16384) {
    throw Error("figure size " + std::to_string(width) + "x" + std::to_string(height) + " is out of range");
  }
  impl_->surface = cairo_image_surface_create(CAIRO_FORMAT_RGB24, width, height);
  impl_->cr = cairo_create(impl_->surface);
  if (cairo_status(impl_->cr) != CAIRO_STATUS_SUCCESS) throw Error("cairo: cannot create a figure");
  fill(impl_->cr, {0, 0, static_cast<double>(width), static_cast<double>(height)}, {1, 1, 1});
}

Figure::~Figure() {
  cairo_destroy(impl_->cr);
  cairo_surface_destroy(impl_->surface);
}

void Figure::line_chart(const Rect& area, const LineChart& chart) {
  cairo_t* cr = impl_->cr;
  const double left = area.x + 64, right = area.x + area.width - 16;
  const double top = area.y + 32, bottom = area.y + area.height - 48;
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const auto& s : chart.series) {
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) continue;
      x0 = std::min(x0, s.x[i]), x1 = std::max(x1, s.x[i]);
      y0 = std::min(y0, s.y[i]), y1 = std::max(y1, s.y[i]);
    }
  }
  if (!std::isfinite(x0)) x0 = 0, x1 = 1, y0 = 0, y1 = 1;
  if (x1 == x0) x1 = x0 + 1;
  if (y1 == y0) y1 = y0 + 1;
  const double pad = (y1 - y0) * 0.05;
  y0 = y0 >= 0 ? std::max(0.0, y0 - pad) : y0 - pad;  // non-negative data: the axis stops at 0
  y1 += pad;
  const auto px = [&](double x) { return left + (x - x0) / (x1 - x0) * (right - left); };
  const auto py = [&](double y) { return bottom - (y - y0) / (y1 - y0) * (bottom - top); };
  for (const double t : nice_ticks(y0, y1, 5)) {
    if (t < y0 || t > y1) continue;
    stroke_line(cr, left, py(t), right, py(t), kGrid);
    draw_text(cr, tick_text(t), left - 6, py(t), Align::kRight);
  }
  for (const double t : nice_ticks(x0, x1, 6)) {
    if (t < x0 || t > x1) continue;
    stroke_line(cr, px(t), bottom, px(t), bottom + 4, kBlack);
    draw_text(cr, tick_text(t), px(t), bottom + 14, Align::kCenter);
  }
  stroke_line(cr, left, top, left, bottom, kBlack);
  stroke_line(cr, left, bottom, right, bottom, kBlack);
  for (const auto& s : chart.series) {
    cairo_set_source_rgb(cr, s.color.r, s.color.g, s.color.b);
    cairo_set_line_width(cr, 1.5);
    bool drawing = false;
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.x[i]) || !std::isfinite(s.y[i])) {
        drawing = false;
        continue;
      }
      if (drawing) {
        cairo_line_to(cr, px(s.x[i]), py(s.y[i]));
      } else {
        cairo_move_to(cr, px(s.x[i]), py(s.y[i]));
      }
      drawing = true;
    }
    cairo_stroke(cr);
  }
  double legend_y = top + 10;
  for (const auto& s : chart.series) {
    if (s.label.empty()) continue;
    const TextSize size = measure(cr, s.label);
    stroke_line(cr, right - size.width - 30, legend_y, right - size.width - 10, legend_y, s.color, 2);
    draw_text(cr, s.label, right - 4, legend_y, Align::kRight);
    legend_y += size.height + 2;
  }
  draw_text(cr, bounded(chart.title), area.x + area.width / 2, area.y + 14, Align::kCenter, kTitleSize);
  draw_text(cr, bounded(chart.x_label), (left + right) / 2, bottom + 34, Align::kCenter);
  draw_text(cr, bounded(chart.y_label), area.x + 12, (top + bottom) / 2, Align::kCenter, kFontSize, /*vertical=*/true);
}

HeatMapLayout heat_map_layout(const HeatMap& map, int cell) {
  cairo_surface_t* scratch = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
  cairo_t* cr = cairo_create(scratch);
  double row_width = 0, column_height = 0;
  for (const auto& l : map.row_labels) row_width = std::max(row_width, measure(cr, bounded(l)).width);
  for (const auto& l : map.column_labels) column_height = std::max(column_height, measure(cr, bounded(l)).width);
  cairo_destroy(cr);
  cairo_surface_destroy(scratch);
  const auto rows = static_cast<double>(map.values.size());
  const auto columns = static_cast<double>(map.values.empty() ? 0 : map.values[0].size());
  HeatMapLayout layout;
  layout.row_labels = {28, 36, row_width + 6, rows * cell};
  layout.grid = {layout.row_labels.x + layout.row_labels.width + 4, 36, columns * cell, rows * cell};
  layout.column_labels = {layout.grid.x, layout.grid.y + layout.grid.height + 4, layout.grid.width, column_height + 6};
  layout.color_bar = {layout.grid.x + layout.grid.width + 16, layout.grid.y, 12, layout.grid.height};
  layout.width = static_cast<int>(std::max(layout.color_bar.x + 60, layout.grid.x + layout.grid.width / 2 + 160));
  layout.height = static_cast<int>(layout.column_labels.y + layout.column_labels.height + 30);
  return layout;
}

void Figure::heat_map(double x, double y, const HeatMap& map, int cell) {
  cairo_t* cr = impl_->cr;
  const HeatMapLayout l = heat_map_layout(map, cell);
  cairo_save(cr);
  cairo_translate(cr, x, y);
  double top_value = 0;
  for (const auto& row : map.values) {
    for (const double v : row) top_value = std::max(top_value, std::isfinite(v) ? v : 0.0);
  }
  if (top_value <= 0) top_value = 1;
  for (std::size_t r = 0; r < map.values.size(); ++r) {
    for (std::size_t c = 0; c < map.values[r].size(); ++c) {
      fill(cr, {l.grid.x + c * cell, l.grid.y + r * cell, static_cast<double>(cell), static_cast<double>(cell)},
           blues(map.values[r][c] / top_value));
    }
    if (r < map.row_labels.size()) {
      draw_text(cr, bounded(map.row_labels[r]), l.row_labels.x + l.row_labels.width, l.grid.y + (r + 0.5) * cell, Align::kRight);
    }
  }
  for (std::size_t c = 0; c < map.column_labels.size() && c < (map.values.empty() ? 0 : map.values[0].size()); ++c) {
    draw_text(cr, bounded(map.column_labels[c]), l.grid.x + (c + 0.5) * cell, l.column_labels.y + 2, Align::kRight,
              kFontSize, /*vertical=*/true);
  }
  const int steps = std::max(1, static_cast<int>(l.color_bar.height));
  for (int k = 0; k < steps; ++k) {
    fill(cr, {l.color_bar.x, l.color_bar.y + k, l.color_bar.width, 1.0}, blues(1.0 - static_cast<double>(k) / steps));
  }
  draw_text(cr, tick_text(top_value), l.color_bar.x + l.color_bar.width + 4, l.color_bar.y + 4, Align::kLeft);
  draw_text(cr, "0", l.color_bar.x + l.color_bar.width + 4, l.color_bar.y + l.color_bar.height - 4, Align::kLeft);
  draw_text(cr, bounded(map.title), l.grid.x + l.grid.width / 2, 16, Align::kCenter, kTitleSize);
  draw_text(cr, bounded(map.x_label), l.grid.x + l.grid.width / 2, l.column_labels.y + l.column_labels.height + 12,
            Align::kCenter);
  draw_text(cr, bounded(map.y_label), 12, l.grid.y + l.grid.height / 2, Align::kCenter, kFontSize, /*vertical=*/true);
  cairo_restore(cr);
}

void Figure::save_png(const std::string& path, WriteTarget target) const {
  cairo_surface_flush(impl_->surface);
  std::string bytes;
  const auto append = [](void* closure, const unsigned char* data, unsigned int length) {
    static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
    return CAIRO_STATUS_SUCCESS;
  };
  if (cairo_surface_write_to_png_stream(impl_->surface, append, &bytes) != CAIRO_STATUS_SUCCESS) {
    throw Error(printable(path) + ": cannot encode the PNG");
  }
  write_file_atomically(
      path, [&](std::ostream& out) { out.write(bytes.data(), static_cast<std::streamsize>(bytes.size())); }, target);
}

void save_line_chart(const LineChart& chart, const std::string& path, int width, int height) {
  Figure figure(width, height);
  figure.line_chart({0, 0, static_cast<double>(width), static_cast<double>(height)}, chart);
  figure.save_png(path);
}

void save_heat_map(const HeatMap& map, const std::string& path, int cell, WriteTarget target) {
  const HeatMapLayout layout = heat_map_layout(map, cell);
  Figure figure(layout.width, layout.height);
  figure.heat_map(0, 0, map, cell);
  figure.save_png(path, target);
}

int missing_glyphs(const std::string& text) {
  cairo_surface_t* scratch = cairo_image_surface_create(CAIRO_FORMAT_RGB24, 1, 1);
  cairo_t* cr = cairo_create(scratch);
  PangoLayout* layout = make_layout(cr, text, kFontSize);
  const int missing = pango_layout_get_unknown_glyphs_count(layout);
  g_object_unref(layout);
  cairo_destroy(cr);
  cairo_surface_destroy(scratch);
  return missing;
}

}  // namespace luong
