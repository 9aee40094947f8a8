// Data sets generated in memory from the seed: `random` (the data-parallel
// tutorial's unlabeled RandomDataset) and `synthetic` (a learnable task: a
// fixed random linear teacher labels standard-normal inputs).
#include <ATen/CPUGeneratorImpl.h>

#include <cmath>

#include "loaders/rng.h"
#include "readers/readers.h"

namespace gputrain::data::detail {
namespace {

// Sub-streams of the experiment seed: the teacher is shared by both splits,
// the inputs differ.
constexpr uint64_t kTeacherStream = 0;
uint64_t split_stream(Split split) { return split == Split::kTrain ? 1 : 2; }

at::Generator generator(uint64_t seed, uint64_t stream) {
  return at::detail::createCPUGenerator(derive_seed(seed, stream));
}

DatasetInfo generated_info(const std::string& name, int64_t samples, int64_t features) {
  DatasetInfo info;
  info.name = name;
  info.source = "generated";
  info.samples = samples;
  info.input_shape = {features};
  return info;
}

}  // namespace

std::shared_ptr<const Dataset> make_random(const config::DataConfig& config, Split split, uint64_t seed) {
  DatasetInfo info = generated_info("random", config.length, config.input_size);
  info.target_kind = TargetKind::kNone;
  torch::Tensor inputs = at::randn({config.length, config.input_size}, generator(seed, split_stream(split)));
  return std::make_shared<TensorDataset>(std::move(info), std::move(inputs), torch::Tensor());
}

std::shared_ptr<const Dataset> make_synthetic(const config::DataConfig& config, Split split, uint64_t seed) {
  const int64_t samples = split == Split::kTrain ? config.samples : config.test_samples;
  at::Generator data = generator(seed, split_stream(split));
  at::Generator teacher = generator(seed, kTeacherStream);
  DatasetInfo info = generated_info("synthetic", samples, config.features);
  torch::Tensor inputs = at::randn({samples, config.features}, data);
  torch::Tensor targets;
  if (config.targets > 0) {
    // Regression: a linear map scaled to unit-variance targets, plus noise
    // small enough that a linear model can get close to zero loss.
    info.target_kind = TargetKind::kValues;
    info.targets = config.targets;
    const torch::Tensor weights =
        at::randn({config.features, config.targets}, teacher) / std::sqrt(static_cast<double>(config.features));
    targets = (inputs.matmul(weights) + 0.01 * at::randn({samples, config.targets}, data)).contiguous();
  } else {
    info.target_kind = TargetKind::kClasses;
    info.classes = config.classes;
    const torch::Tensor weights = at::randn({config.features, config.classes}, teacher);
    targets = inputs.matmul(weights).argmax(1).contiguous();
  }
  return std::make_shared<TensorDataset>(std::move(info), std::move(inputs), std::move(targets));
}

}  // namespace gputrain::data::detail
