#include "gputrain/step/backends.h"

#include <ATen/Context.h>
#include <ATen/Parallel.h>

namespace gputrain::step {

int libtorch_default_threads() {
  // Taken before any run sets it, so that a later run in the same process
  // (tests) gets LibTorch's default back rather than an earlier run's choice.
  static const int default_threads = at::get_num_threads();
  return default_threads;
}

void configure_backends(const std::string& matmul_precision, int64_t threads, bool cudnn_benchmark) {
  at::globalContext().setFloat32MatmulPrecision(matmul_precision);
  at::set_num_threads(threads > 0 ? static_cast<int>(threads) : libtorch_default_threads());
  at::globalContext().setBenchmarkCuDNN(cudnn_benchmark);
}

CudnnSearchOff::CudnnSearchOff() : was_on_(at::globalContext().benchmarkCuDNN()) {
  at::globalContext().setBenchmarkCuDNN(false);
}

CudnnSearchOff::~CudnnSearchOff() { at::globalContext().setBenchmarkCuDNN(was_on_); }

}  // namespace gputrain::step
