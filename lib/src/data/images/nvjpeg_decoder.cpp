#include "images/nvjpeg_decoder.h"

#include <fmt/format.h>

#include "gputrain/common/error.h"
#include "images/nvjpeg_library.h"

#if GPUTRAIN_WITH_NVJPEG
#include <c10/cuda/CUDACachingAllocator.h>
// c10::DeviceGuard, not c10::cuda::CUDAGuard: its inline code calls the CUDA runtime,
// which gputrain does not link (LibTorch's is the process's one).
#include <c10/core/DeviceGuard.h>
#include <c10/cuda/CUDAStream.h>

#include "images/nvjpeg_api.h"
#endif

namespace gputrain::data::detail {

#if GPUTRAIN_WITH_NVJPEG
namespace {

// nvJPEG's device buffers come from LibTorch's caching allocator, on the
// current stream. No exception may cross nvJPEG's C frames: a failure is the
// non-zero return nvJPEG reports as NVJPEG_STATUS_ALLOCATOR_FAILURE.
int torch_malloc(void** ptr, size_t size) {
  try {
    *ptr = c10::cuda::CUDACachingAllocator::raw_alloc(size);
    return 0;
  } catch (...) {
    *ptr = nullptr;
    return 2;  // cudaErrorMemoryAllocation
  }
}
int torch_free(void* ptr) {
  try {
    c10::cuda::CUDACachingAllocator::raw_delete(ptr);
    return 0;
  } catch (...) {
    return 1;
  }
}

const char* status_text(nvjpegStatus_t status) {
  switch (status) {
    case NVJPEG_STATUS_BAD_JPEG:
      return "not a JPEG it can read";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED:
      return "a JPEG kind it does not decode";
    case NVJPEG_STATUS_INCOMPLETE_BITSTREAM:
      return "truncated";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE:
      return "out of device memory";
    default:
      return "decoding failed";
  }
}

}  // namespace

struct NvjpegDecoder::State {
  const NvjpegApi* lib = nullptr;
  torch::Device device{torch::kCUDA};
  int64_t channels = 3;
  nvjpegDevAllocator_t allocator{&torch_malloc, &torch_free};
  nvjpegHandle_t handle = nullptr;
  nvjpegJpegState_t batched = nullptr;
  int batch_size = 0;  // what decode_batched_initialize was last told

  nvjpegOutputFormat_t format() const { return channels == 1 ? NVJPEG_OUTPUT_Y : NVJPEG_OUTPUT_RGB; }

  // After a failed batch: a DataError naming the first file nvJPEG cannot
  // decode alone; returns when each one decodes alone.
  void throw_first_bad(const std::vector<EncodedImage>& images, std::vector<nvjpegImage_t>& outputs,
                       cudaStream_t stream) {
    nvjpegJpegState_t single = nullptr;
    if (lib->state_create(handle, &single) != NVJPEG_STATUS_SUCCESS) return;
    for (std::size_t i = 0; i < images.size(); ++i) {
      const auto* data = reinterpret_cast<const unsigned char*>(images[i].bytes.data());
      const nvjpegStatus_t status =
          lib->decode(handle, single, data, images[i].bytes.size(), format(), &outputs[i], stream);
      if (status != NVJPEG_STATUS_SUCCESS) {
        lib->state_destroy(single);
        throw DataError(
            fmt::format("{}: nvJPEG cannot decode it ({}, status {}); set data.decode: cpu to decode "
                        "with libjpeg-turbo, or replace the file",
                        images[i].name, status_text(status), static_cast<int>(status)));
      }
    }
    lib->state_destroy(single);
  }
};

NvjpegDecoder::NvjpegDecoder(torch::Device device, int64_t channels) : state_(std::make_unique<State>()) {
  GPUTRAIN_CHECK(device.is_cuda() && (channels == 1 || channels == 3), "nvJPEG decoder on {} with {} channels",
                 device.str(), channels);
  const NvjpegLibrary& library = nvjpeg_library();
  if (!library.loaded()) throw DataError(fmt::format("data.decode: gpu: {}", library.why_not));
  const NvjpegApi& lib = *library.api;
  state_->lib = &lib;
  state_->device = device;
  state_->channels = channels;
  const c10::DeviceGuard guard(device);
  nvjpegStatus_t status = lib.create_ex(NVJPEG_BACKEND_DEFAULT, &state_->allocator, nullptr, 0, &state_->handle);
  if (status == NVJPEG_STATUS_SUCCESS) status = lib.state_create(state_->handle, &state_->batched);
  if (status != NVJPEG_STATUS_SUCCESS) {
    if (state_->handle != nullptr) lib.destroy(state_->handle);
    throw DataError(
        fmt::format("data.decode: gpu: nvJPEG ({}) could not start on {} (status {}); set "
                    "data.decode: cpu",
                    library.path, device.str(), static_cast<int>(status)));
  }
}

NvjpegDecoder::~NvjpegDecoder() {
  const c10::DeviceGuard guard(state_->device);
  if (state_->batched != nullptr) state_->lib->state_destroy(state_->batched);
  if (state_->handle != nullptr) state_->lib->destroy(state_->handle);
}

std::vector<torch::Tensor> NvjpegDecoder::decode(const std::vector<EncodedImage>& images) {
  State& s = *state_;
  const NvjpegApi& lib = *s.lib;
  const c10::DeviceGuard guard(s.device);
  const cudaStream_t stream = c10::cuda::getCurrentCUDAStream(s.device.index()).stream();
  const auto options = torch::TensorOptions().dtype(torch::kUInt8).device(s.device);
  std::vector<torch::Tensor> out;
  std::vector<nvjpegImage_t> outputs(images.size());
  std::vector<const unsigned char*> data(images.size());
  std::vector<size_t> lengths(images.size());
  for (std::size_t i = 0; i < images.size(); ++i) {
    const EncodedImage& image = images[i];
    data[i] = reinterpret_cast<const unsigned char*>(image.bytes.data());
    lengths[i] = image.bytes.size();
    int components = 0;
    nvjpegChromaSubsampling_t subsampling{};
    int widths[NVJPEG_MAX_COMPONENT] = {};
    int heights[NVJPEG_MAX_COMPONENT] = {};
    const nvjpegStatus_t status =
        lib.get_image_info(s.handle, data[i], lengths[i], &components, &subsampling, widths, heights);
    if (status != NVJPEG_STATUS_SUCCESS || widths[0] <= 0 || heights[0] <= 0) {
      throw DataError(
          fmt::format("{}: nvJPEG cannot read it as a JPEG ({}, status {}); data.decode: gpu decodes "
                      "JPEG files only: set data.decode: cpu, or replace the file",
                      image.name, status_text(status), static_cast<int>(status)));
    }
    if (components != 1 && components != 3) {
      throw DataError(
          fmt::format("{}: a JPEG of {} colour components (CMYK), which nvJPEG does not convert; set "
                      "data.decode: cpu, whose decoder converts CMYK to RGB",
                      image.name, components));
    }
    torch::Tensor pixels = torch::empty({s.channels, heights[0], widths[0]}, options);
    for (int64_t c = 0; c < s.channels; ++c) {
      outputs[i].channel[c] = pixels.data_ptr<uint8_t>() + c * heights[0] * widths[0];
      outputs[i].pitch[c] = static_cast<size_t>(widths[0]);
    }
    out.push_back(std::move(pixels));
  }
  if (images.empty()) return out;
  const int count = static_cast<int>(images.size());
  if (count != s.batch_size) {
    const nvjpegStatus_t status = lib.decode_batched_initialize(s.handle, s.batched, count, 1, s.format());
    GPUTRAIN_CHECK(status == NVJPEG_STATUS_SUCCESS, "nvjpegDecodeBatchedInitialize({}): status {}", count,
                   static_cast<int>(status));
    s.batch_size = count;
  }
  const nvjpegStatus_t status =
      lib.decode_batched(s.handle, s.batched, data.data(), lengths.data(), outputs.data(), stream);
  if (status != NVJPEG_STATUS_SUCCESS) {
    s.batch_size = 0;  // a failed batch must be initialised again
    s.throw_first_bad(images, outputs, stream);
    throw DataError(
        fmt::format("nvJPEG could not decode a batch of {} files ({}, status {}), the first {}; set "
                    "data.decode: cpu",
                    count, status_text(status), static_cast<int>(status), images.front().name));
  }
  return out;
}

#else

struct NvjpegDecoder::State {};

NvjpegDecoder::NvjpegDecoder(torch::Device /*device*/, int64_t /*channels*/) {
  throw DataError(fmt::format("data.decode: gpu: {}", nvjpeg_library().why_not));
}
NvjpegDecoder::~NvjpegDecoder() = default;
std::vector<torch::Tensor> NvjpegDecoder::decode(const std::vector<EncodedImage>& /*images*/) { return {}; }

#endif

}  // namespace gputrain::data::detail
