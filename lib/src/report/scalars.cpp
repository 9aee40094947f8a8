#include "scalars.h"

#include <fmt/format.h>

#include <string>
#include <type_traits>

#include "metrics_record.h"

namespace gputrain::report::detail {

namespace {

// The scalars a record's fields name (metrics_record.h), under `section`.
class ScalarsOf {
 public:
  ScalarsOf(std::string section, unsigned kind, bool labeled, bool fp16, std::vector<report::Scalar>& out)
      : section_(std::move(section)), kind_(kind), labeled_(labeled), fp16_(fp16), out_(out) {}

  template <class T>
  void field(const char*, const T&) {}  // a field with no scalar

  template <class T>
  void field(const char*, const T& value, const Scalar& scalar) {
    using When = Scalar::When;
    if ((scalar.kinds & kind_) == 0 || (scalar.when == When::kLabeled && !labeled_) ||
        (scalar.when == When::kFp16 && !fp16_)) {
      return;
    }
    if constexpr (IsOptional<T>::value) {
      if (value) add(scalar, static_cast<double>(*value));
    } else {
      add(scalar, static_cast<double>(value));
    }
  }

  // Each monitored GPU's figures, as gpu/cuda<index>_<name>.
  void field(const char*, const std::vector<GpuRecord>& gpus) {
    for (const GpuRecord& gpu : gpus) {
      ScalarsOf of_gpu(fmt::format("gpu/cuda{}_", gpu.index), kind_, labeled_, fp16_, out_);
      visit(of_gpu, gpu);
    }
  }

 private:
  void add(const Scalar& scalar, double value) {
    const std::string name = scalar.name;
    out_.emplace_back(name.find('/') == std::string::npos ? section_ + name : name,
                      static_cast<float>(value * scalar.scale));
  }

  std::string section_;
  unsigned kind_;
  bool labeled_;
  bool fp16_;
  std::vector<report::Scalar>& out_;
};

// The scalars `record` holds, under its kind's section.
void add_scalars(const MetricsRecord& record, bool labeled, bool fp16, std::vector<report::Scalar>& scalars) {
  static constexpr struct {
    RecordKind kind;
    unsigned mask;
    const char* section;
  } kSections[] = {{RecordKind::kInterval, kOnInterval, "train_step/"},
                   {RecordKind::kEpoch, kOnEpoch, "train/"},
                   {RecordKind::kTest, kOnTest, "test/"}};
  for (const auto& section : kSections) {
    if (section.kind != record.kind) continue;
    ScalarsOf scalars_of(section.section, section.mask, labeled, fp16, scalars);
    visit(scalars_of, record);
  }
}

}  // namespace

std::vector<report::Scalar> step_scalars(const train::StepMetrics& m, bool labeled, bool fp16) {
  std::vector<report::Scalar> scalars;
  add_scalars(interval_record(m), labeled, fp16, scalars);
  return scalars;
}

std::vector<report::Scalar> epoch_scalars(const train::EpochMetrics& m, bool labeled, bool fp16) {
  std::vector<report::Scalar> scalars;
  for (const MetricsRecord& record : epoch_records(m)) add_scalars(record, labeled, fp16, scalars);
  return scalars;
}

}  // namespace gputrain::report::detail
