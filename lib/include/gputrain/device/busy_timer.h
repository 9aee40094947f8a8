#pragma once
// How much of a window the GPU spent on the training steps, from CUDA events
// recorded on the current stream just before and just after each step. NVML's
// utilisation is sampled every 500 ms, longer than a whole epoch of the small
// recipes; events bracket each step exactly. The sum of (end - start) over the
// steps leaves out the gaps where the stream waited for the host, so its ratio
// to the wall-clock window is the share of the time the GPU had work queued.
#include <torch/types.h>

#include <memory>
#include <optional>

namespace gputrain::device {

class StepBusyTimer {
 public:
  // Times nothing (every call is a no-op, busy_seconds() unset) unless
  // `device` is a CUDA device.
  explicit StepBusyTimer(const torch::Device& device);
  ~StepBusyTimer();
  StepBusyTimer(const StepBusyTimer&) = delete;
  StepBusyTimer& operator=(const StepBusyTimer&) = delete;

  void step_begin();  // records an event on the current stream: no host sync
  void step_end();
  // The GPU seconds between each begin and its end since the last call, then
  // starts over. Waits for the last event, so call it where the loop syncs anyway.
  std::optional<double> take_busy_seconds();

 private:
  struct Events;
  std::unique_ptr<Events> events_;  // null off CUDA
};

}  // namespace gputrain::device
