#include "gputrain/config/schema.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <regex>
#include <thread>

namespace gputrain::config {

std::string describe(const Min& constraint) { return fmt::format(">= {}", constraint.min); }

std::string describe(const Range& constraint) {
  if (std::isinf(constraint.max)) return fmt::format("{} {}", constraint.min_open ? ">" : ">=", constraint.min);
  return fmt::format("in {}{}, {}{}", constraint.min_open ? "(" : "[", constraint.min, constraint.max,
                     constraint.max_open ? ")" : "]");
}

bool is_run_name(const std::string& name) {
  static const std::regex kSafeName("[A-Za-z0-9][A-Za-z0-9._-]*");
  return std::regex_match(name, kSafeName);
}

bool is_device_text(const std::string& device) {
  static const std::regex kDevice("auto|cpu|cuda|cuda:[0-9]+|mps");
  return std::regex_match(device, kDevice);
}

bool is_inside_run_dir(const std::string& dir) {
  const std::filesystem::path path(dir);
  if (dir.empty() || path.is_absolute() || path.lexically_normal() == ".") return false;
  return std::none_of(path.begin(), path.end(), [](const auto& part) { return part == ".."; });
}

int64_t max_threads() {
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  return std::max<int64_t>(16, 4 * static_cast<int64_t>(hardware));
}

std::string too_many_threads(int64_t value) {
  return fmt::format(
      "must be <= {} (got {}): 4 per hardware thread of this machine ({}) at most, as more only "
      "compete for the cores",
      max_threads(), value, std::max(1u, std::thread::hardware_concurrency()));
}

std::vector<DatasetOnlyKey> dataset_only_keys(const DataConfig& c) {
  const DataConfig d;
  return {{"target_column", DatasetName::kCsv, c.target_column != d.target_column},
          {"test_root", DatasetName::kImageFolder, c.test_root != d.test_root},
          {"image_size", DatasetName::kImageFolder, c.image_size != d.image_size},
          {"channels", DatasetName::kImageFolder, c.channels != d.channels},
          {"cache", DatasetName::kImageFolder, c.cache != d.cache},
          {"length", DatasetName::kRandom, c.length != d.length},
          {"input_size", DatasetName::kRandom, c.input_size != d.input_size},
          {"samples", DatasetName::kSynthetic, c.samples != d.samples},
          {"test_samples", DatasetName::kSynthetic, c.test_samples != d.test_samples},
          {"features", DatasetName::kSynthetic, c.features != d.features},
          {"classes", DatasetName::kSynthetic, c.classes != d.classes},
          {"targets", DatasetName::kSynthetic, c.targets != d.targets}};
}

}  // namespace gputrain::config
