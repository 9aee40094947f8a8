#include "gputrain/train/faults.h"

#include <fmt/format.h>

#include <regex>

namespace gputrain::train {

namespace {
double gib(int64_t bytes) { return static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0); }
}  // namespace

std::string out_of_memory_message(const OutOfMemoryContext& c) {
  std::string advice = "Lower data.batch_size";
  if (!c.amp) advice += ", train in mixed precision (train.amp: bf16, or fp16)";
  if (c.batch.micro % 2 == 0) {
    advice += fmt::format(", or keep the batch and halve the micro-batch with train.accumulation_steps: {}",
                          2 * c.batch.accumulation);
  }
  return fmt::format(
      "{} ran out of memory at data.batch_size {} (micro-batch {}): {:.2f} GiB allocated by tensors "
      "(peak {:.2f} GiB), {:.2f} GiB reserved by the caching allocator, {:.2f} GiB total. {}. No "
      "checkpoint was damaged. (LibTorch: {})",
      c.device, c.batch.global, c.batch.micro, gib(c.memory.allocated), gib(c.memory.peak_allocated),
      gib(c.memory.reserved), gib(c.memory.total), advice, c.detail);
}

bool is_out_of_memory(const std::string& message) {
  for (const char* sign : {"CUDA out of memory", "CUDA error: out of memory", "CUBLAS_STATUS_ALLOC_FAILED",
                           "CUDNN_STATUS_ALLOC_FAILED", "CUDNN_STATUS_NOT_ENOUGH_WORKSPACE"}) {
    if (message.find(sign) != std::string::npos) return true;
  }
  return false;
}

std::string failing_device(const std::string& message, const std::string& fallback) {
  static const std::regex gpu(R"(\bGPU (\d+)\b)");
  std::smatch found;
  if (std::regex_search(message, found, gpu)) return "cuda:" + found[1].str();
  return fallback;
}

std::string non_finite_loss_message(int64_t epoch, const step::NonFiniteSeen& seen,
                                    const std::string& last_checkpoint) {
  return fmt::format(
      "epoch {}, {}: the loss is not finite (inf or NaN){}, so training stops (train.on_nan: stop). "
      "{}. Lower optim.lr, clip gradients with train.grad_clip, or skip such batches with "
      "train.on_nan: skip",
      epoch, step::step_range(seen),
      seen.steps > 1 ? fmt::format(" at {} of them; none of those updated the weights", seen.steps) : "",
      last_checkpoint.empty() ? "No checkpoint was written before it"
                              : "The last good checkpoint is " + last_checkpoint);
}

}  // namespace gputrain::train
