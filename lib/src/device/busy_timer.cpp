#include "gputrain/device/busy_timer.h"

#ifdef GPUTRAIN_WITH_CUDA
#include <c10/cuda/CUDAEvent.h>
#endif

#include <vector>

namespace gputrain::device {

#ifdef GPUTRAIN_WITH_CUDA
// Event pairs are kept and reused: creating an event costs a driver call.
struct StepBusyTimer::Events {
  std::vector<c10::cuda::CUDAEvent> begins, ends;
  std::size_t used = 0;  // pairs recorded since the last take
};

StepBusyTimer::StepBusyTimer(const torch::Device& device)
    : events_(device.is_cuda() ? std::make_unique<Events>() : nullptr) {}

void StepBusyTimer::step_begin() {
  if (!events_) return;
  if (events_->used == events_->begins.size()) {
    events_->begins.emplace_back(cudaEventDefault);  // timing on: CUDAEvent() turns it off
    events_->ends.emplace_back(cudaEventDefault);
  }
  events_->begins[events_->used].record();
}

void StepBusyTimer::step_end() {
  if (!events_) return;
  events_->ends[events_->used].record();
  ++events_->used;
}

std::optional<double> StepBusyTimer::take_busy_seconds() {
  if (!events_) return std::nullopt;
  double ms = 0;
  if (events_->used > 0) events_->ends[events_->used - 1].synchronize();
  for (std::size_t i = 0; i < events_->used; ++i) ms += events_->begins[i].elapsed_time(events_->ends[i]);
  events_->used = 0;
  return ms / 1e3;
}
#else
struct StepBusyTimer::Events {};

StepBusyTimer::StepBusyTimer(const torch::Device&) {}
void StepBusyTimer::step_begin() {}
void StepBusyTimer::step_end() {}
std::optional<double> StepBusyTimer::take_busy_seconds() { return std::nullopt; }
#endif

StepBusyTimer::~StepBusyTimer() = default;

}  // namespace gputrain::device
