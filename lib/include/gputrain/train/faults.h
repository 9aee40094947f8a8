#pragma once
// The messages of failures met in the middle of training, built from plain
// values so that tests can check them without causing the fault.
#include <cstdint>
#include <string>

#include "gputrain/device/memory.h"
#include "gputrain/plan/batch_plan.h"
#include "gputrain/step/non_finite.h"

namespace gputrain::train {

struct OutOfMemoryContext {
  std::string device;  // the device that ran out: "cuda:0", a dp replica's "cuda:3"
  plan::BatchPlan batch;
  bool amp = false;  // train.amp is already on
  device::MemoryStats memory;
  std::string detail;  // LibTorch's message, first line
};

// "cuda:0 ran out of memory at data.batch_size 256 (micro-batch 256): 7.61 GiB
// allocated (peak 7.70 GiB), 7.80 GiB reserved, 8.00 GiB total. Lower data.batch_size, ..."
std::string out_of_memory_message(const OutOfMemoryContext& context);

// Whether LibTorch's error message says a GPU ran out of memory: the caching
// allocator's, or cuBLAS or cuDNN failing to allocate a workspace, which
// arrive as plain c10::Errors.
bool is_out_of_memory(const std::string& libtorch_message);

// The device LibTorch's message names ("... GPU 1 has a total capacity of
// ..." is cuda:1), or `fallback` when it names none.
std::string failing_device(const std::string& libtorch_message, const std::string& fallback);

// What train.on_nan: stop says: where the loss went non-finite, the last good
// checkpoint ("" when none), and what to change.
std::string non_finite_loss_message(int64_t epoch, const step::NonFiniteSeen& seen, const std::string& last_checkpoint);

}  // namespace gputrain::train
