#pragma once
// Pictures: line charts (learning curves) and labelled heat maps (attention), drawn with cairo and
// text set with pango, which shapes every script in its own direction, so Arabic tokens appear as
// Arabic, right to left. Written as PNG, atomically.
#include <memory>
#include <string>
#include <vector>

#include "luong/util/atomic_file.h"

namespace luong {

struct Color {
  double r = 0, g = 0, b = 0;  ///< 0..1
};

/// The "Blues" ramp of the seed's heat maps, for v in [0, 1].
Color blues(double v);

struct Rect {
  double x = 0, y = 0, width = 0, height = 0;
};

struct LineSeries {
  std::string label;
  std::vector<double> x, y;  ///< non-finite points are skipped
  Color color{0.12, 0.47, 0.71};
};

struct LineChart {
  std::string title, x_label, y_label;
  std::vector<LineSeries> series;
};

struct HeatMap {
  std::vector<std::vector<double>> values;  ///< [rows][columns], >= 0
  std::vector<std::string> row_labels, column_labels;  ///< any script (UTF-8)
  std::string title, x_label, y_label;
};

/// Where a heat map's parts go, at `cell` pixels a cell: what save_heat_map draws, and what the tests check.
struct HeatMapLayout {
  int width = 0, height = 0;
  Rect grid, row_labels, column_labels, color_bar;
};
HeatMapLayout heat_map_layout(const HeatMap& map, int cell = 30);

/// An image being drawn.
class Figure {
 public:
  Figure(int width, int height);
  ~Figure();
  Figure(const Figure&) = delete;
  Figure& operator=(const Figure&) = delete;

  /// Axes with 1-2-5 ticks, title, labels and a legend inside `area`; an axis of non-negative data starts at 0.
  void line_chart(const Rect& area, const LineChart& chart);
  /// The map as heat_map_layout() places it, offset to (x, y).
  void heat_map(double x, double y, const HeatMap& map, int cell = 30);
  /// Writes the figure as an RGB PNG, atomically (write_file_atomically, `target` as there). Throws
  /// luong::Error on failure.
  void save_png(const std::string& path, WriteTarget target = WriteTarget::kOwnFile) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

void save_line_chart(const LineChart& chart, const std::string& path, int width = 640, int height = 400);
void save_heat_map(const HeatMap& map, const std::string& path, int cell = 30,
                   WriteTarget target = WriteTarget::kOwnFile);

/// How many characters of `text` the installed fonts cannot draw (0: every glyph exists).
int missing_glyphs(const std::string& text);

}  // namespace luong
