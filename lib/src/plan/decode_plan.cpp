#include "gputrain/plan/decode_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <optional>

#include "gputrain/common/error.h"

namespace gputrain::plan {

namespace {

bool is_jpeg(const std::filesystem::path& file) {
  std::string extension = file.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return extension == ".jpg" || extension == ".jpeg";
}

// Why data.decode: gpu cannot run for `dataset` on `device`, with the fix; nullopt when it can.
std::optional<std::pair<std::string, std::string>> gpu_blocker(const config::DataConfig& data,
                                                               const data::Dataset& dataset,
                                                               const torch::Device& device,
                                                               const std::function<std::string()>& nvjpeg_missing) {
  if (!device.is_cuda()) {
    return std::pair{device.is_cpu() ? std::string("the run is on the CPU")
                                     : fmt::format("the run is on {}, not CUDA", device.str()),
                     "run on a CUDA device (device: cuda)"};
  }
  if (data.dataset != config::DatasetName::kImageFolder) {
    return std::pair{fmt::format("data.dataset is {}, not image_folder", config::word(data.dataset)),
                     "it decodes image_folder's JPEG files"};
  }
  const int64_t samples = dataset.info().samples;
  if (samples == 0 || dataset.sample_file(0) == nullptr) {
    return std::pair{std::string("the images are decoded once, into memory (data.cache)"),
                     "set data.cache: none to decode each batch's files"};
  }
  for (int64_t i = 0; i < samples; ++i) {
    if (const std::filesystem::path* file = dataset.sample_file(i); !is_jpeg(*file)) {
      return std::pair{fmt::format("{} is not a JPEG", file->string()), "nvJPEG decodes JPEG files only"};
    }
  }
  if (data.augment.reflect) {
    return std::pair{std::string("data.augment.reflect is on"), "its crops pad with zeros only; set it false"};
  }
  if (const std::string missing = nvjpeg_missing(); !missing.empty()) {
    return std::pair{fmt::format("nvJPEG cannot be used: {}", missing),
                     "install the nvidia-nvjpeg wheel scripts/setup.sh pins"};
  }
  return std::nullopt;
}

}  // namespace

data::DecodeChoice decide_decode(const config::LoadedConfig& loaded, const data::Dataset& dataset,
                                 const torch::Device& device, const std::function<std::string()>& nvjpeg_missing) {
  const config::ImageDecode setting = loaded.config.data.decode;
  if (setting == config::ImageDecode::kCpu) return {false, "set"};
  const auto blocker = gpu_blocker(loaded.config.data, dataset, device, nvjpeg_missing);
  if (setting == config::ImageDecode::kAuto) {
    if (blocker) return {false, "auto: " + blocker->first};
    return {true, "auto: image_folder's JPEGs read per batch on CUDA, nvJPEG loaded"};
  }
  if (blocker) {
    throw ConfigError(
        loaded.sources.at("data.decode"), "data.decode",
        fmt::format("gpu cannot run here: {} ({}); set data.decode: auto or cpu", blocker->first, blocker->second));
  }
  return {true, "set"};
}

}  // namespace gputrain::plan
