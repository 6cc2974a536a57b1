#include "luong/util/plot.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace luong {
namespace {

const Rgb kBlack{0, 0, 0};
const Rgb kGrey{200, 200, 200};

std::string format_tick(double v) {
  char buffer[32];
  if (std::abs(v) >= 1000 || v == std::floor(v)) {
    std::snprintf(buffer, sizeof buffer, "%.0f", v);
  } else if (std::abs(v) >= 10) {
    std::snprintf(buffer, sizeof buffer, "%.1f", v);
  } else {
    std::snprintf(buffer, sizeof buffer, "%.2f", v);
  }
  return buffer;
}

}  // namespace

void draw_line_chart(Canvas& canvas, const PlotArea& area, const std::vector<Series>& series, const std::string& title,
                     const std::string& x_label, const std::string& y_label) {
  const int left = area.x + 60, right = area.x + area.width - 15;
  const int top = area.y + 28, bottom = area.y + area.height - 45;
  double x0 = INFINITY, x1 = -INFINITY, y0 = INFINITY, y1 = -INFINITY;
  for (const auto& s : series) {
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
  // Losses are never negative: an axis for non-negative data stops at 0.
  y0 = y0 >= 0 ? std::max(0.0, y0 - pad) : y0 - pad;
  y1 += pad;
  const auto px = [&](double x) { return left + static_cast<int>(std::lround((x - x0) / (x1 - x0) * (right - left))); };
  const auto py = [&](double y) { return bottom - static_cast<int>(std::lround((y - y0) / (y1 - y0) * (bottom - top))); };

  for (int k = 0; k <= 4; ++k) {
    const double yv = y0 + (y1 - y0) * k / 4.0;
    const int y = py(yv);
    canvas.line(left, y, right, y, kGrey);
    const std::string label = format_tick(yv);
    canvas.text(left - 6 - Canvas::text_width(label), y - Canvas::text_height() / 2, label, kBlack);
    const double xv = x0 + (x1 - x0) * k / 4.0;
    const int x = px(xv);
    canvas.line(x, bottom, x, bottom + 4, kBlack);
    const std::string xl = format_tick(xv);
    canvas.text(x - Canvas::text_width(xl) / 2, bottom + 6, xl, kBlack);
  }
  canvas.line(left, top, left, bottom, kBlack);
  canvas.line(left, bottom, right, bottom, kBlack);
  for (const auto& s : series) {
    bool have = false;
    int lx = 0, ly = 0;
    for (std::size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!std::isfinite(s.y[i])) {
        have = false;
        continue;
      }
      const int x = px(s.x[i]), y = py(s.y[i]);
      if (have) canvas.line(lx, ly, x, y, s.color);
      canvas.fill_rect(x - 1, y - 1, 3, 3, s.color);
      lx = x, ly = y, have = true;
    }
  }
  int legend_y = top + 4;
  for (const auto& s : series) {
    if (s.label.empty()) continue;
    const int w = Canvas::text_width(s.label);
    canvas.fill_rect(right - w - 22, legend_y + 5, 14, 3, s.color);
    canvas.text(right - w - 4, legend_y, s.label, kBlack);
    legend_y += Canvas::text_height() + 2;
  }
  canvas.text(area.x + (area.width - Canvas::text_width(title)) / 2, area.y + 6, title, kBlack);
  canvas.text(left + (right - left - Canvas::text_width(x_label)) / 2, bottom + 24, x_label, kBlack);
  canvas.text(area.x + 2, top + (bottom - top + Canvas::text_width(y_label)) / 2, y_label, kBlack, /*vertical=*/true);
}

void draw_heatmap(Canvas& canvas, const PlotArea& area, const std::vector<std::vector<double>>& values,
                  const std::vector<std::string>& row_labels, const std::vector<std::string>& column_labels,
                  const std::string& title, const std::string& x_label, const std::string& y_label) {
  const int rows = static_cast<int>(values.size());
  const int cols = rows > 0 ? static_cast<int>(values[0].size()) : 0;
  if (rows == 0 || cols == 0) return;
  int row_label_width = 0, column_label_height = 0;
  for (const auto& l : row_labels) row_label_width = std::max(row_label_width, Canvas::text_width(l));
  for (const auto& l : column_labels) column_label_height = std::max(column_label_height, Canvas::text_width(l));
  const int left = area.x + 22 + row_label_width + 6;
  const int top = area.y + 28;
  const int bar_width = 60;
  const int cell = std::max(4, std::min((area.width - (left - area.x) - bar_width) / cols,
                                        (area.height - 28 - column_label_height - 30) / rows));
  double max_value = 0;
  for (const auto& row : values) {
    for (double v : row) max_value = std::max(max_value, std::isfinite(v) ? v : 0.0);
  }
  if (max_value <= 0) max_value = 1;
  for (int r = 0; r < rows; ++r) {
    for (int c = 0; c < cols; ++c) {
      canvas.fill_rect(left + c * cell, top + r * cell, cell, cell, blues(values[static_cast<std::size_t>(r)][static_cast<std::size_t>(c)] / max_value));
    }
    if (r < static_cast<int>(row_labels.size())) {
      const auto& l = row_labels[static_cast<std::size_t>(r)];
      canvas.text(left - 4 - Canvas::text_width(l), top + r * cell + (cell - Canvas::text_height()) / 2, l, kBlack);
    }
  }
  for (int c = 0; c < cols && c < static_cast<int>(column_labels.size()); ++c) {
    const auto& l = column_labels[static_cast<std::size_t>(c)];
    canvas.text(left + c * cell + (cell - Canvas::text_height()) / 2, top + rows * cell + 4 + Canvas::text_width(l), l,
                kBlack, /*vertical=*/true);
  }
  // colour bar
  const int bar_x = left + cols * cell + 16;
  for (int y = 0; y < rows * cell; ++y) canvas.fill_rect(bar_x, top + y, 12, 1, blues(1.0 - static_cast<double>(y) / (rows * cell)));
  canvas.text(bar_x + 16, top - 2, format_tick(max_value), kBlack);
  canvas.text(bar_x + 16, top + rows * cell - Canvas::text_height(), "0", kBlack);
  canvas.text(area.x + (area.width - Canvas::text_width(title)) / 2, area.y + 6, title, kBlack);
  canvas.text(left + (cols * cell - Canvas::text_width(x_label)) / 2, top + rows * cell + column_label_height + 10,
              x_label, kBlack);
  canvas.text(area.x + 2, top + (rows * cell + Canvas::text_width(y_label)) / 2, y_label, kBlack, /*vertical=*/true);
}

}  // namespace luong
