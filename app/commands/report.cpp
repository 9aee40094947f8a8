#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "commands.h"
#include "gputrain/common/error.h"
#include "gputrain/report/html_report.h"
#include "gputrain/report/run_dir.h"

namespace gputrain::app {

int run_report(const ReportArgs& args) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(args.run_dir)) {
    throw UserError(
        fmt::format("{}: no such run directory; `gputrain train` writes <output.dir>/<name>/", args.run_dir));
  }
  const fs::path out = args.out.empty() ? report::run_paths(fs::path(args.run_dir)).report : fs::path(args.out);
  if (out.has_parent_path() && !fs::is_directory(out.parent_path())) {
    throw UserError(fmt::format("{}: the directory for --out does not exist", out.string()));
  }
  report::write_html_report(args.run_dir, out);
  std::cout << out.string() << std::endl;
  return 0;
}

}  // namespace gputrain::app
