#pragma once
// Line charts as inline SVG text, so the HTML report needs no script and no
// network: linear axes with round ticks, a legend, and a tooltip per marker.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace gputrain::report::detail {

struct Series {
  std::string name;
  std::string color;                              // CSS colour
  std::vector<std::pair<double, double>> points;  // (x, y); non-finite values are left out
  bool markers = false;                           // a circle with a tooltip per point (always when there is one point)
  bool dashed = false;
  double width = 2;
};

struct Chart {
  std::string title;  // the accessible name; the page shows its own caption
  std::string x_label;
  std::string y_label;
  std::vector<Series> series;
  bool integer_x = true;  // x counts steps or epochs: no ticks between whole numbers
};

// True when some series has a finite point.
bool has_data(const Chart& chart);
std::string render_svg(const Chart& chart);

// & < > " ' as character references: safe in text and in quoted attributes.
std::string html_escape(std::string_view text);

}  // namespace gputrain::report::detail
