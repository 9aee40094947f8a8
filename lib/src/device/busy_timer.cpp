#include "gputrain/device/busy_timer.h"

#ifdef GPUTRAIN_WITH_CUDA
#include <c10/core/Event.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>
#endif

#include <vector>

namespace gputrain::device {

#ifdef GPUTRAIN_WITH_CUDA
// c10::Event reaches CUDA through LibTorch's device interface, so gputrain makes
// no CUDA runtime call of its own. Event pairs are kept and reused: creating an
// event costs a driver call.
struct StepBusyTimer::Events {
  explicit Events(const torch::Device& d)
      : device(d.has_index() ? d : torch::Device(torch::kCUDA, c10::cuda::current_device())) {}
  void record(std::vector<c10::Event>& events, std::size_t i) {
    if (i == events.size()) events.emplace_back(c10::DeviceType::CUDA, c10::EventFlag::BACKEND_DEFAULT);  // timing on
    events[i].record(c10::cuda::getCurrentCUDAStream(device.index()).unwrap());
  }
  torch::Device device;
  std::vector<c10::Event> begins, ends;
  std::size_t used = 0;  // pairs recorded since the last take
};

StepBusyTimer::StepBusyTimer(const torch::Device& device)
    : events_(device.is_cuda() ? std::make_unique<Events>(device) : nullptr) {}

void StepBusyTimer::step_begin() {
  if (events_) events_->record(events_->begins, events_->used);
}

void StepBusyTimer::step_end() {
  if (!events_) return;
  events_->record(events_->ends, events_->used);
  ++events_->used;
}

std::optional<double> StepBusyTimer::take_busy_seconds() {
  if (!events_) return std::nullopt;
  double ms = 0;
  if (events_->used > 0) events_->ends[events_->used - 1].synchronize();
  for (std::size_t i = 0; i < events_->used; ++i) ms += events_->begins[i].elapsedTime(events_->ends[i]);
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
