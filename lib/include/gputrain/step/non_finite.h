#pragma once
// train.on_nan without a host sync per step (issue 36). Each optimizer step's
// loss is checked on the device: found() becomes 1 when it is inf or NaN, the
// optimizer then makes no update (the fused kernels' found_inf), and the step
// is noted in a device-side history. Only read() waits for the device; the
// loop calls it where it waits anyway (a log interval, the epoch's end, before
// a checkpoint or an evaluation) and applies train.on_nan there. The same
// code runs inside the CUDA graph and in the eager step.
#include <torch/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace gputrain::step {

// Optimizer steps whose loss was not finite (train.on_nan), as one read found them.
struct NonFiniteSeen {
  int64_t steps = 0;    // how many
  int64_t first = 0;    // the first one's step number (0: none)
  int64_t last = 0;     // the last one's
  int64_t samples = 0;  // their samples, all told
};

// "step 5", or "steps 5 to 9" when there were several.
std::string step_range(const NonFiniteSeen& seen);

class NonFiniteSteps {
 public:
  // `mask_sums`: kept() zeroes a non-finite step's sums (train.on_nan: skip
  // keeps them out of the metrics); otherwise it returns them as they are.
  NonFiniteSteps(const torch::Device& device, bool mask_sums);

  // Device work only, no sync (a CUDA graph captures it): found() becomes 1
  // when `step_loss`, the step's summed loss, is inf or NaN, else 0, and the
  // step is noted. `across_ranks` (ddp) makes found() the same on every rank
  // before it is noted, so every rank skips, counts and stops alike.
  void check(const torch::Tensor& step_loss, const std::function<void(torch::Tensor&)>& across_ranks = {});
  // A float32 scalar on the device, 1 for a non-finite step: the optimizer's found_inf.
  const torch::Tensor& found() const { return found_; }
  // `sum` of the step last checked, or 0 in its place when that step was not finite and sums are masked.
  torch::Tensor kept(const torch::Tensor& sum) const;

  // Host bookkeeping of the step just checked, outside any graph: its number and rows.
  void stepped(int64_t step, int64_t samples);
  // Waits for the device: the non-finite steps since the last read (samples:
  // as stepped() gave them); forgets them.
  NonFiniteSeen read();

 private:
  void drain();  // the device history into seen_ (a sync)

  bool mask_sums_;
  torch::Tensor found_;                               // float32 []
  torch::Tensor bad_;                                 // bool [], found() != 0 of the step last checked (mask_sums only)
  torch::Tensor history_;                             // float32 [kCapacity]: found() of each step since the last drain
  torch::Tensor next_;                                // int64 [1]: where the next step's entry goes
  std::vector<std::pair<int64_t, int64_t>> pending_;  // (step, samples) of each entry in history_
  NonFiniteSeen seen_;
};

}  // namespace gputrain::step
