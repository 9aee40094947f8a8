#pragma once
// report.html: one self-contained page about a run (no script, no network):
// loss, accuracy, samples/s, learning rate, fp16's loss scale, GPU memory and
// utilization as inline SVG charts, an epoch table, the per-replica batch
// splits of dp and ddp, the resolved config and the device report.
#include <filesystem>

namespace gputrain::report {

// Reads what `run_dir` holds (metrics.jsonl, and run.json, config.yaml and
// device.json where present) and writes the page to `out` atomically. An
// interrupted or crashed run is shown as far as it got; what is missing or cut
// short is said on the page. Throws UserError when there is no metrics.jsonl.
void write_html_report(const std::filesystem::path& run_dir, const std::filesystem::path& out);

}  // namespace gputrain::report
