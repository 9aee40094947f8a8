#pragma once
// Requests from outside the training loop (app/'s signal handlers, tests),
// polled by the trainer at optimizer-step boundaries, as Caffe's solver polls
// its signal flags. Every member is a lock-free atomic operation, so a signal
// handler may call them.
#include <atomic>

namespace gputrain::train {

class StopToken {
 public:
  // Finish the current optimizer step, write a checkpoint when
  // train.on_sigint is `checkpoint`, and stop. Returns whether a stop had
  // already been requested (a second SIGINT).
  bool request_stop() { return stop_.exchange(true); }
  // Write a checkpoint at the next step boundary and carry on.
  void request_checkpoint() { checkpoint_.store(true); }
  // A preemption notice: finish the step, checkpoint (whatever
  // train.on_sigint says) and stop with ExitCode::kPreempted.
  void request_preemption() {
    preempt_.store(true);
    stop_.store(true);
  }

  bool stop_requested() const { return stop_.load(); }
  bool preemption_requested() const { return preempt_.load(); }
  // Whether a checkpoint was requested since the last call.
  bool take_checkpoint_request() { return checkpoint_.exchange(false); }

 private:
  static_assert(std::atomic<bool>::is_always_lock_free, "signal handlers need lock-free atomics");
  std::atomic<bool> stop_{false};
  std::atomic<bool> checkpoint_{false};
  std::atomic<bool> preempt_{false};
};

}  // namespace gputrain::train
