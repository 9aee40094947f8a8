#pragma once
// data.decode: gpu's decoder: a batch of JPEG files' bytes decoded with
// nvJPEG's batched API into uint8 [C, H, W] CUDA tensors, each at its stored
// size, on the current CUDA stream. Outputs are LibTorch tensors (its caching
// allocator), and so are nvJPEG's own device buffers.
#include <torch/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gputrain::data::detail {

// One file's bytes, and its name for errors.
struct EncodedImage {
  std::string name;
  std::string bytes;
};

class NvjpegDecoder {
 public:
  // Decodes to `channels` (1: grey, the JPEG's luma, as libjpeg's grey
  // output; 3: RGB, grey files repeated in each channel) on `device`, a CUDA
  // device. Throws DataError when nvJPEG cannot be loaded (saying why).
  NvjpegDecoder(torch::Device device, int64_t channels);
  ~NvjpegDecoder();
  NvjpegDecoder(const NvjpegDecoder&) = delete;
  NvjpegDecoder& operator=(const NvjpegDecoder&) = delete;

  // One tensor per image, in order, queued on c10::cuda::getCurrentCUDAStream().
  // A file that is no JPEG, or one nvJPEG cannot decode, is a DataError naming
  // it; a CMYK JPEG is refused (the CPU decoder converts it: data.decode: cpu).
  std::vector<torch::Tensor> decode(const std::vector<EncodedImage>& images);

 private:
  struct State;
  std::unique_ptr<State> state_;
};

}  // namespace gputrain::data::detail
