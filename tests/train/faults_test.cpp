// The messages of faults met mid-training, from fake figures: a GPU's
// out-of-memory error cannot be caused on a machine without one, so the
// catching itself (Trainer::fit) is checked only on CUDA machines by hand.
#include "gputrain/train/faults.h"

#include <gtest/gtest.h>

namespace gputrain::train {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

TEST(Faults, OutOfMemoryGivesTheFiguresAndWhatToChange) {
  OutOfMemoryContext c;
  c.device = "cuda:1";
  c.batch.global = 256;
  c.batch.micro = 128;
  c.batch.accumulation = 2;
  c.memory.allocated = 7 * kGiB + kGiB / 2;
  c.memory.peak_allocated = 7 * kGiB + 3 * kGiB / 4;
  c.memory.reserved = 8 * kGiB - kGiB / 4;
  c.memory.total = 8 * kGiB;
  c.detail = "CUDA out of memory. Tried to allocate 2.00 GiB";
  EXPECT_EQ(out_of_memory_message(c),
            "cuda:1 ran out of memory at data.batch_size 256 (micro-batch 128): 7.50 GiB allocated by tensors (peak "
            "7.75 GiB), 7.75 GiB reserved by the caching allocator, 8.00 GiB total. Lower data.batch_size, train in "
            "mixed precision "
            "(train.amp: bf16, or fp16), or keep the batch and halve the micro-batch with "
            "train.accumulation_steps: 4. No checkpoint was damaged. (LibTorch: CUDA out of memory. Tried to "
            "allocate 2.00 GiB)");
  c.amp = true;
  c.batch.global = 3;
  c.batch.micro = 3;
  c.batch.accumulation = 1;
  const std::string odd = out_of_memory_message(c);
  EXPECT_EQ(odd.find("mixed precision"), std::string::npos) << odd;  // already on
  EXPECT_EQ(odd.find("accumulation"), std::string::npos) << odd;     // 3 does not halve
}

TEST(Faults, OutOfMemoryIsRecognisedFromEveryLibrary) {
  EXPECT_TRUE(is_out_of_memory("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 1 has a total capacity of 79 GiB"));
  EXPECT_TRUE(is_out_of_memory("CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"));
  EXPECT_TRUE(is_out_of_memory("cuDNN error: CUDNN_STATUS_ALLOC_FAILED"));
  EXPECT_TRUE(is_out_of_memory("CUDA error: out of memory"));
  EXPECT_FALSE(is_out_of_memory("CUDA error: an illegal memory access was encountered"));
}

TEST(Faults, TheFailingDeviceIsTheOneLibTorchNames) {
  // Under dp a replica's GPU runs out, not the primary one.
  EXPECT_EQ(failing_device("CUDA out of memory. Tried to allocate 20.00 MiB. GPU 3 has a total capacity of 79.10 GiB",
                           "cuda:0"),
            "cuda:3");
  EXPECT_EQ(failing_device("CUDA error: CUBLAS_STATUS_ALLOC_FAILED", "cuda:0"), "cuda:0");
}

TEST(Faults, NonFiniteLossNamesWhereAndTheLastCheckpoint) {
  EXPECT_EQ(non_finite_loss_message(2, {1, 17, 17, 0}, "runs/x/checkpoints/ckpt-s00000016-e0001-b000006.ckpt"),
            "epoch 2, step 17: the loss is not finite (inf or NaN), so training stops (train.on_nan: stop). The last "
            "good checkpoint is runs/x/checkpoints/ckpt-s00000016-e0001-b000006.ckpt. Lower optim.lr, clip gradients "
            "with train.grad_clip, or skip such batches with train.on_nan: skip");
  EXPECT_NE(non_finite_loss_message(1, {1, 2, 2, 0}, "").find("No checkpoint was written before it."),
            std::string::npos);
}

// Under the device-side check the loop learns of non-finite steps at its next read, several at once.
TEST(Faults, NonFiniteLossNamesTheStepRangeOfARead) {
  EXPECT_EQ(step::step_range({3, 5, 9, 96}), "steps 5 to 9");
  EXPECT_EQ(step::step_range({1, 5, 5, 32}), "step 5");
  const std::string start =
      "epoch 1, steps 5 to 9: the loss is not finite (inf or NaN) at 3 of them; none of those updated the "
      "weights, so training stops (train.on_nan: stop). The last good checkpoint is c.ckpt";
  EXPECT_EQ(non_finite_loss_message(1, {3, 5, 9, 96}, "c.ckpt").substr(0, start.size()), start);
}

}  // namespace
}  // namespace gputrain::train
