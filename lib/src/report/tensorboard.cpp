#include "gputrain/report/tensorboard.h"

#include <vector>

#include "metrics_record.h"
#include "scalars.h"

namespace gputrain::report {

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& run_dir, const RunInfo& run)
    : file_(run_dir), labeled_(run.task != Task::kUnlabeled), fp16_(run.amp == config::AmpMode::kFp16) {}

void TensorBoardWriter::on_step(const train::StepMetrics& m) {
  file_.add(m.step, detail::step_scalars(m, labeled_, fp16_));
}

void TensorBoardWriter::on_epoch(const train::EpochMetrics& m) {
  // Forward-only (unlabeled) runs take no optimizer steps: their axis is the epoch.
  file_.add(labeled_ ? m.step : m.epoch, detail::epoch_scalars(m, labeled_, fp16_));
}

}  // namespace gputrain::report
