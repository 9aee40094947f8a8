#include <fmt/format.h>

#include <filesystem>
#include <iostream>

#include "commands.h"
#include "gputrain/common/error.h"
#include "gputrain/common/output_file.h"
#include "gputrain/report/html_report.h"
#include "gputrain/report/mlflow.h"
#include "gputrain/report/run_dir.h"

namespace gputrain::app {

int run_report(const ReportArgs& args) {
  namespace fs = std::filesystem;
  if (!fs::is_directory(args.run_dir)) {
    throw UserError(
        fmt::format("{}: no such run directory; `gputrain train` writes <output.dir>/<name>/", args.run_dir));
  }
  if (args.mlflow) {
    const report::MlflowResent sent = report::resend_to_mlflow(args.run_dir);
    std::cout << fmt::format("sent {} records to {}", sent.records, sent.run_url) << std::endl;
    return 0;
  }
  const fs::path own = report::run_paths(fs::path(args.run_dir)).report;
  const fs::path out = args.out.empty() ? own : fs::path(args.out);
  // The run's report.html is the one file of the run this command writes; any
  // other (its metrics, config, weights) is what the report is made from.
  std::error_code error;
  if (!fs::equivalent(out, own, error)) check_output_file(out, {{"the run directory", args.run_dir}}, /*force=*/true);
  if (out.has_parent_path() && !fs::is_directory(out.parent_path())) {
    throw UserError(fmt::format("{}: the directory for --out does not exist", out.string()));
  }
  report::write_html_report(args.run_dir, out);
  std::cout << out.string() << std::endl;
  return 0;
}

}  // namespace gputrain::app
