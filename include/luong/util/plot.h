#pragma once
// Line charts and labelled heat maps drawn on a Canvas (loss curves, attention matrices).
#include <string>
#include <vector>

#include "luong/util/png_writer.h"

namespace luong {

struct PlotArea {
  int x = 0, y = 0, width = 0, height = 0;
};

struct Series {
  std::string label;
  std::vector<double> x;
  std::vector<double> y;
  Rgb color{31, 119, 180};
};

/// Axes with ticks, title and labels; one polyline per series (NaN points are skipped).
void draw_line_chart(Canvas& canvas, const PlotArea& area, const std::vector<Series>& series, const std::string& title,
                     const std::string& x_label, const std::string& y_label);

/// values[row][col] in [0, max], coloured with blues(); row labels on the left, column labels rotated
/// under the map, a colour bar on the right. Labels must be ASCII (see data::transliterate()).
void draw_heatmap(Canvas& canvas, const PlotArea& area, const std::vector<std::vector<double>>& values,
                  const std::vector<std::string>& row_labels, const std::vector<std::string>& column_labels,
                  const std::string& title, const std::string& x_label, const std::string& y_label);

}  // namespace luong
