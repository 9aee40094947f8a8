#pragma once
// The HTML report's curves: which charts a run gets, and their series from its metrics.
#include <string>
#include <vector>

#include "html_run.h"
#include "svg_chart.h"

namespace gputrain::report::detail {

struct Figured {
  std::string caption;
  std::string note;
  Chart chart;
};

// The charts that have data, in page order.
std::vector<Figured> make_charts(const Run& run);

}  // namespace gputrain::report::detail
