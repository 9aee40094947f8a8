#include "gputrain/config/schema.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <regex>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace gputrain::config {

std::string describe(const Min& constraint) {
  if (constraint.max == std::numeric_limits<int64_t>::max()) return fmt::format(">= {}", constraint.min);
  return fmt::format("in [{}, {}]", constraint.min, constraint.max);
}

std::string describe(const Range& constraint) {
  if (std::isinf(constraint.max)) return fmt::format("{} {}", constraint.min_open ? ">" : ">=", constraint.min);
  return fmt::format("in {}{}, {}{}", constraint.min_open ? "(" : "[", constraint.min, constraint.max,
                     constraint.max_open ? ")" : "]");
}

std::vector<std::pair<std::string, int64_t>> pixels_asked(const DataConfig& c) {
  std::vector<std::pair<std::string, int64_t>> asked;
  const auto area = [](const std::vector<int64_t>& size) { return size.front() * size.back(); };
  if (!c.image_size.empty()) asked.emplace_back("image_size", area(c.image_size));
  if (c.resize > 0) asked.emplace_back("resize", c.resize * c.resize);
  if (!c.center_crop.empty()) asked.emplace_back("center_crop", area(c.center_crop));
  const int64_t crop = c.augment.random_resized_crop.size;
  if (crop > 0) asked.emplace_back("data.augment.random_resized_crop.size", crop * crop);
  return asked;
}

bool is_run_name(const std::string& name) {
  static const std::regex kSafeName("[A-Za-z0-9][A-Za-z0-9._-]*");
  return std::regex_match(name, kSafeName);
}

namespace {

// The device kinds' words; `cuda` alone may take a ":N" index.
constexpr ChoiceTable<DeviceKind, 4> kDeviceKinds{
    {{{"auto", DeviceKind::kAuto}, {"cpu", DeviceKind::kCpu}, {"cuda", DeviceKind::kCuda}, {"mps", DeviceKind::kMps}}}};

}  // namespace

std::optional<DeviceRequest> DeviceRequest::parse(const std::string& text) {
  if (const auto kind = kDeviceKinds.parse(text)) return DeviceRequest{*kind, std::nullopt};
  constexpr std::string_view kIndexed = "cuda:";
  if (text.rfind(kIndexed, 0) != 0 || text.size() == kIndexed.size()) return std::nullopt;
  int64_t index = -1;
  const char* first = text.data() + kIndexed.size();
  const char* last = text.data() + text.size();
  const auto [end, error] = std::from_chars(first, last, index);
  if (error != std::errc() || end != last || index < 0) return std::nullopt;
  return DeviceRequest{DeviceKind::kCuda, index};
}

std::string DeviceRequest::text() const {
  const std::string word = kDeviceKinds.word(kind);
  return index ? word + ":" + std::to_string(*index) : word;
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

bool all_distinct(std::vector<int64_t> values) {
  std::sort(values.begin(), values.end());
  return std::adjacent_find(values.begin(), values.end()) == values.end();
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

namespace {

// Collects the schema's fixed_on_resume declarations as dotted keys (or sections).
class FixedKeys : public KeysOnly {
 public:
  FixedKeys(std::string prefix, std::vector<std::pair<std::string, FixedOnResume>>& out)
      : prefix_(std::move(prefix)), out_(out) {}
  template <typename T, typename C>
  void field(const char*, const T&, const C&, const char*) {}
  template <typename S>
  void section(const char* key, S& sub) {
    FixedKeys inner(prefix_ + key + ".", out_);
    visit(inner, sub);
  }
  void fixed_on_resume(const char* key, FixedOnResume when) { out_.emplace_back(prefix_ + key, when); }

 private:
  std::string prefix_;
  std::vector<std::pair<std::string, FixedOnResume>>& out_;
};

}  // namespace

bool is_fixed_on_resume(const std::string& key, bool mid_epoch) {
  static const std::vector<std::pair<std::string, FixedOnResume>> fixed = [] {
    std::vector<std::pair<std::string, FixedOnResume>> out;
    ExperimentConfig defaults;
    FixedKeys keys("", out);
    visit(keys, defaults);
    return out;
  }();
  return std::any_of(fixed.begin(), fixed.end(), [&](const auto& rule) {
    const bool covers = key == rule.first || key.rfind(rule.first + ".", 0) == 0;
    return covers && (rule.second == FixedOnResume::kAlways || mid_epoch);
  });
}

}  // namespace gputrain::config
