#pragma once
// Run directories as `gputrain train` leaves them, written through the report
// module's own writers, for the HTML report's tests: data-parallel over two
// GPUs under fp16 with NVML figures, finished or cut off mid-run.
#include <filesystem>

namespace gputrain::testing {

// Charts the finished run's report holds: loss, accuracy, throughput, hardware
// efficiency, learning rate, loss scale, GPU memory, GPU utilization and loader wait.
inline constexpr int kFinishedRunCharts = 9;

// Three epochs of 4 steps (log intervals every 2), train and test records with
// CUDA memory and two GPUs' NVML figures; run.json "finished"; config.yaml and
// device.json carry text that must be escaped ("<script>", "&", quotes).
void write_finished_run(const std::filesystem::path& dir);

// Planned for three epochs, killed while writing epoch 2's test record: epoch
// 1 complete, epoch 2's log intervals and train record, then a last line cut
// short; run.json still "running".
void write_interrupted_run(const std::filesystem::path& dir);

}  // namespace gputrain::testing
