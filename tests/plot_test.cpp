// Pictures: a heat map labels its rows and columns with the real tokens, Arabic included, and the
// PNG it writes decodes to the size its layout promises.
#include "luong/util/plot.h"

#include <cairo.h>
#include <gtest/gtest.h>

#include <filesystem>

namespace luong {
namespace {

// Non-white pixels of `surface` inside `area`.
int inked(cairo_surface_t* surface, const Rect& area) {
  const int stride = cairo_image_surface_get_stride(surface);
  const unsigned char* data = cairo_image_surface_get_data(surface);
  int count = 0;
  for (int y = static_cast<int>(area.y); y < static_cast<int>(area.y + area.height); ++y) {
    for (int x = static_cast<int>(area.x); x < static_cast<int>(area.x + area.width); ++x) {
      const auto* pixel = reinterpret_cast<const std::uint32_t*>(data + y * stride) + x;
      count += (*pixel & 0xffffff) != 0xffffff;
    }
  }
  return count;
}

TEST(PlotTest, FontsDrawArabicAndLatin) {
  EXPECT_EQ(missing_glyphs("يجب أن نفعل هذا بأنفسنا"), 0);
  EXPECT_EQ(missing_glyphs("We have to do this <eos>"), 0);
}

TEST(PlotTest, HeatMapLabelsAreDrawnInTheirScript) {
  HeatMap map;
  map.values = {{0.1, 0.9, 0.0}, {0.5, 0.2, 0.3}};
  map.row_labels = {"علينا", "<eos>"};
  map.column_labels = {"we", "must", "."};
  map.title = "attention";
  const std::string path = (std::filesystem::temp_directory_path() / "luong_plot_test.png").string();
  save_heat_map(map, path);
  cairo_surface_t* png = cairo_image_surface_create_from_png(path.c_str());
  ASSERT_EQ(cairo_surface_status(png), CAIRO_STATUS_SUCCESS);
  const HeatMapLayout layout = heat_map_layout(map);
  EXPECT_EQ(cairo_image_surface_get_width(png), layout.width);
  EXPECT_EQ(cairo_image_surface_get_height(png), layout.height);
  cairo_surface_flush(png);
  // The first row's label area holds the Arabic word; the grid holds colour; the labels' areas are not blank.
  Rect first_row = layout.row_labels;
  first_row.height = 30;
  EXPECT_GT(inked(png, first_row), 20);
  EXPECT_GT(inked(png, layout.column_labels), 20);
  EXPECT_GT(inked(png, layout.grid), static_cast<int>(layout.grid.width * layout.grid.height / 2));
  // Wider text needs a wider label area: the layout measures what it draws.
  HeatMap wider = map;
  wider.row_labels[0] = "علينا أن نفعل هذا بأنفسنا";
  EXPECT_GT(heat_map_layout(wider).row_labels.width, layout.row_labels.width + 50);
  cairo_surface_destroy(png);
  std::filesystem::remove(path);
}

TEST(PlotTest, LineChartWritesAPng) {
  LineChart chart{"loss", "epoch", "loss", {{"train", {1, 2, 3}, {3.0, 2.0, NAN}, {}}}};
  const std::string path = (std::filesystem::temp_directory_path() / "luong_chart_test.png").string();
  save_line_chart(chart, path, 320, 200);
  cairo_surface_t* png = cairo_image_surface_create_from_png(path.c_str());
  ASSERT_EQ(cairo_surface_status(png), CAIRO_STATUS_SUCCESS);
  EXPECT_EQ(cairo_image_surface_get_width(png), 320);
  EXPECT_GT(inked(png, {70, 40, 230, 100}), 50);  // the curve
  cairo_surface_destroy(png);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace luong
