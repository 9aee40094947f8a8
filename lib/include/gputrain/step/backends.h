#pragma once
// The process-wide LibTorch settings a run's fast paths choose (the rules:
// plan/fast_paths.h).
#include <cstdint>
#include <string>

namespace gputrain::step {

// LibTorch's intra-op threads as they were before any run set them.
int libtorch_default_threads();

// Float32 matmul precision (highest | high | medium, as at::Context takes it),
// intra-op threads (0: LibTorch's default) and cuDNN's benchmark mode (it
// times the convolution algorithms for each new input shape and keeps the fastest).
void configure_backends(const std::string& matmul_precision, int64_t threads, bool cudnn_benchmark);

// cuDNN's benchmark mode off while it lives, then back as it was. Evaluation's
// shapes (the test batch, each test-time view) run a few times a run: searching
// their algorithms would cost the run more than it saves, so only the shapes
// training runs are searched.
class CudnnSearchOff {
 public:
  CudnnSearchOff();
  ~CudnnSearchOff();
  CudnnSearchOff(const CudnnSearchOff&) = delete;
  CudnnSearchOff& operator=(const CudnnSearchOff&) = delete;

 private:
  bool was_on_;
};

}  // namespace gputrain::step
