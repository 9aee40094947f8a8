// `gputrain export --format state_dict|safetensors` (export/export_weights.h).
#include "gputrain/export/export_weights.h"

#include <gtest/gtest.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/linear.h>

#include <cstdint>
#include <string>

#include "gputrain/checkpoint/safetensors.h"
#include "gputrain/checkpoint/weights.h"
#include "gputrain/common/error.h"
#include "support/temp_dir.h"

namespace gputrain::exporting {
namespace {

using checkpoint::ExportedWeights;
using checkpoint::load_weights;
using checkpoint::read_safetensors;
using checkpoint::save_weights;
using testing::TempDir;

// gputrain -> safetensors -> gputrain: a model's weights exported as
// safetensors load into a fresh model as the model.pt they came from.
TEST(ExportWeights, SafetensorsLoadBackAsTheModelPtTheyCameFrom) {
  TempDir dir;
  const auto make = [](uint64_t seed) {
    torch::manual_seed(seed);
    torch::nn::Sequential model;
    model->push_back("fc", torch::nn::Linear(3, 4));
    model->push_back("bn", torch::nn::BatchNorm1d(4));
    return model;
  };
  torch::nn::Sequential trained = make(1);
  trained->forward(torch::randn({5, 3}));  // running statistics and num_batches_tracked that are not the initial ones
  save_weights(trained, (dir / "model.pt").string());
  ExportOptions options;
  options.format = WeightsFormat::kSafetensors;
  const ExportSummary summary = export_weights((dir / "model.pt").string(), (dir / "w.safetensors").string(), options);
  EXPECT_EQ(summary.tensors, 7);  // weight, bias; weight, bias, running_mean, running_var, num_batches_tracked
  EXPECT_EQ(read_safetensors(dir / "w.safetensors").metadata.at("format"), "pt");

  torch::nn::Sequential loaded = make(2);
  load_weights(loaded, (dir / "w.safetensors").string());
  for (const auto& p : trained->named_parameters()) {
    EXPECT_TRUE(torch::equal(loaded->named_parameters()[p.key()], p.value())) << p.key();
  }
  for (const auto& b : trained->named_buffers()) {
    EXPECT_TRUE(torch::equal(loaded->named_buffers()[b.key()], b.value())) << b.key();
  }
  // And on again: the safetensors file exports as the model.pt did.
  export_weights((dir / "w.safetensors").string(), (dir / "again.safetensors").string(), options);
  EXPECT_EQ(testing::read_text(dir / "again.safetensors"), testing::read_text(dir / "w.safetensors"));
  // Like a model.pt it holds one set of weights.
  EXPECT_THROW(load_weights(loaded, (dir / "w.safetensors").string(), ExportedWeights::kLive), CheckpointError);
}

}  // namespace
}  // namespace gputrain::exporting
