#pragma once
// The messages of failures met in the middle of training, built from plain
// values so that tests can check them without causing the fault.
#include <cstdint>
#include <string>

#include "gputrain/device/memory.h"

namespace gputrain::train {

struct OutOfMemoryContext {
  std::string device;  // "cuda:0"
  int64_t batch_size = 0;
  int64_t accumulation_steps = 1;
  bool amp = false;  // train.amp is already on
  device::MemoryStats memory;
  std::string detail;  // LibTorch's message, first line
};

// "cuda:0 ran out of memory at data.batch_size 256 (micro-batch 256): 7.61 GiB
// allocated, 7.80 GiB reserved, 8.00 GiB total. Lower data.batch_size, ..."
std::string out_of_memory_message(const OutOfMemoryContext& context);

// What train.on_nan: stop says: where the loss went non-finite, the last good
// checkpoint ("" when none), and what to change.
std::string non_finite_loss_message(int64_t epoch, int64_t step, const std::string& last_checkpoint);

}  // namespace gputrain::train
