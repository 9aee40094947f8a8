#pragma once
// Evaluation passes: the test split after each epoch, and `gputrain test` on
// saved weights; and the lines that report them.
#include <torch/nn/modules/container/sequential.h>

#include <memory>
#include <string>

#include "gputrain/config/config.h"
#include "gputrain/data/batch_loader.h"
#include "gputrain/device/resolve.h"
#include "gputrain/optim/loss.h"
#include "gputrain/parallel/strategy.h"
#include "gputrain/plan/run_plan.h"
#include "gputrain/step/amp.h"
#include "gputrain/step/running_sums.h"

namespace gputrain::train {

// train.tta: the views of each test image whose logits are averaged.
struct TestTimeAugmentation {
  bool hflip = false;
  int64_t translate = 0;  // pixels
  bool enabled() const { return hflip || translate > 0; }
  int64_t views() const { return (translate > 0 ? 5 : 1) * (hflip ? 2 : 1); }
};
TestTimeAugmentation test_time_augmentation(const config::TtaConfig& config);

// Which views of an image are scored, for the log: "none, each image alone",
// "10 per image, their outputs averaged (train.tta: the image, shifted ...)".
std::string describe_views(const TestTimeAugmentation& tta);

// The views of images [N, C, H, W]: the images, shifted by `translate` pixels
// up, down, left and right (the edge mirrored in, as airbench's reflect
// padding), and with hflip each of those mirrored: 1, 2, 5 or 10 views.
std::vector<torch::Tensor> tta_views(const torch::Tensor& images, const TestTimeAugmentation& tta);

// The model's outputs for `inputs`: with `tta` enabled, the mean (in float32)
// of its outputs for every view.
torch::Tensor test_time_outputs(torch::nn::Sequential& model, parallel::Strategy& strategy, const torch::Tensor& inputs,
                                const TestTimeAugmentation& tta);

// One pass over `batches` in eval mode under no-grad; leaves the model in
// eval mode. Classification also counts the confusion matrix, on the device.
// With `tta` enabled the outputs are the mean of the views' outputs. cuDNN
// searches no algorithms for its shapes (step::CudnnSearchOff).
step::EvalResult evaluate(torch::nn::Sequential& model, data::BatchLoader& batches, parallel::Strategy& strategy,
                          const optim::LossSpec& loss, config::AmpMode amp, const TestTimeAugmentation& tta = {});

// Saved weights on `devices`' primary device, for `test` and `predict`: the
// model for `info`'s samples with the weights of `weights_path` (a model.pt or
// a checkpoint); a CheckpointError for weights that do not fit.
struct SavedModel {
  std::unique_ptr<parallel::Strategy> strategy;  // one replica: the primary device
  torch::nn::Sequential model;
};
SavedModel load_saved_model(const config::ModelConfig& config, const data::DatasetInfo& info,
                            const device::DevicePlan& devices, const std::string& weights_path, const char* purpose);

// `gputrain test`: builds the model the plan says it was trained on, loads
// `weights_path` (a model.pt or a checkpoint) into it and evaluates it on the
// plan's test split with the plan's test-time views, which it logs. Throws
// CheckpointError for weights that do not fit.
step::EvalResult evaluate_saved_weights(const plan::RunPlan& plan, const std::string& weights_path);

// "Test set: Average loss: 0.0123, Accuracy: 9012/10000 (90%)", exactly as the
// multi-GPU (DataParallel) tutorial prints it; regression prints the loss alone.
std::string format_test_line(const step::EvalResult& result);

// One line per class, as the CIFAR-10 tutorial prints them: "Accuracy of
// class 3: 87% (870/1000)", "Accuracy of class 3 (cat): ..." where the class
// has a name; none without classes. Past kDenseConfusionClasses classes, a
// line per commonest confusion follows.
std::vector<std::string> format_class_lines(const step::EvalResult& result);

}  // namespace gputrain::train
