#include "gputrain/report/tensorboard.h"

#include <fmt/format.h>

#include <string>
#include <type_traits>
#include <vector>

#include "metrics_record.h"

namespace gputrain::report {

namespace {

using detail::MetricsRecord;
using detail::RecordKind;

// The scalars a record's fields name (metrics_record.h), under `section`.
class ScalarsOf {
 public:
  ScalarsOf(std::string section, unsigned kind, bool labeled, bool fp16, std::vector<Scalar>& out)
      : section_(std::move(section)), kind_(kind), labeled_(labeled), fp16_(fp16), out_(out) {}

  template <class T>
  void field(const char*, const T&) {}  // a field with no scalar

  template <class T>
  void field(const char*, const T& value, const detail::Scalar& scalar) {
    using When = detail::Scalar::When;
    if ((scalar.kinds & kind_) == 0 || (scalar.when == When::kLabeled && !labeled_) ||
        (scalar.when == When::kFp16 && !fp16_)) {
      return;
    }
    if constexpr (detail::IsOptional<T>::value) {
      if (value) add(scalar, static_cast<double>(*value));
    } else {
      add(scalar, static_cast<double>(value));
    }
  }

  // Each monitored GPU's figures, as gpu/cuda<index>_<name>.
  void field(const char*, const std::vector<detail::GpuRecord>& gpus) {
    for (const detail::GpuRecord& gpu : gpus) {
      ScalarsOf of_gpu(fmt::format("gpu/cuda{}_", gpu.index), kind_, labeled_, fp16_, out_);
      visit(of_gpu, gpu);
    }
  }

 private:
  void add(const detail::Scalar& scalar, double value) {
    const std::string name = scalar.name;
    out_.emplace_back(name.find('/') == std::string::npos ? section_ + name : name,
                      static_cast<float>(value * scalar.scale));
  }

  std::string section_;
  unsigned kind_;
  bool labeled_;
  bool fp16_;
  std::vector<Scalar>& out_;
};

// The scalars `record` holds, under its kind's section.
void add_scalars(const MetricsRecord& record, bool labeled, bool fp16, std::vector<Scalar>& scalars) {
  static constexpr struct {
    RecordKind kind;
    unsigned mask;
    const char* section;
  } kSections[] = {{RecordKind::kInterval, detail::kOnInterval, "train_step/"},
                   {RecordKind::kEpoch, detail::kOnEpoch, "train/"},
                   {RecordKind::kTest, detail::kOnTest, "test/"}};
  for (const auto& section : kSections) {
    if (section.kind != record.kind) continue;
    ScalarsOf scalars_of(section.section, section.mask, labeled, fp16, scalars);
    visit(scalars_of, record);
  }
}

}  // namespace

TensorBoardWriter::TensorBoardWriter(const std::filesystem::path& run_dir, const RunInfo& run)
    : file_(run_dir), labeled_(run.task != Task::kUnlabeled), fp16_(run.amp == config::AmpMode::kFp16) {}

void TensorBoardWriter::on_step(const train::StepMetrics& m) {
  std::vector<Scalar> scalars;
  add_scalars(detail::interval_record(m), labeled_, fp16_, scalars);
  file_.add(m.step, scalars);
}

void TensorBoardWriter::on_epoch(const train::EpochMetrics& m) {
  std::vector<Scalar> scalars;
  for (const MetricsRecord& record : detail::epoch_records(m)) add_scalars(record, labeled_, fp16_, scalars);
  // Forward-only (unlabeled) runs take no optimizer steps: their axis is the epoch.
  file_.add(labeled_ ? m.step : m.epoch, scalars);
}

}  // namespace gputrain::report
