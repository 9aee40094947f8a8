// data.decode decided in the plan: gpu only where nvJPEG can decode the run's
// files on its CUDA device, each refusal of auto's said, and gpu where it
// cannot run a ConfigError at the key's line. The devices are only named
// here (a torch::Device needs no GPU), so every case runs on the CPU.
#include "gputrain/plan/decode_plan.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "gputrain/common/error.h"
#include "gputrain/config/load.h"

namespace gputrain::plan {
namespace {

namespace fs = std::filesystem;

// Image files read per batch (or held, with no files), as image_folder is under data.cache: none / memory.
class Files final : public data::Dataset {
 public:
  explicit Files(std::vector<fs::path> files) : files_(std::move(files)) {
    info_.samples = static_cast<int64_t>(files_.size());
    info_.images = true;
  }
  const data::DatasetInfo& info() const override { return info_; }
  const torch::Tensor& inputs() const override { return none_; }
  const torch::Tensor& targets() const override { return none_; }
  const fs::path* sample_file(int64_t index) const override {
    return held ? nullptr : &files_.at(static_cast<std::size_t>(index));
  }
  bool held = false;

 private:
  std::vector<fs::path> files_;
  data::DatasetInfo info_;
  torch::Tensor none_;
};

config::LoadedConfig decode_config(const std::string& decode, const std::string& more = "") {
  return config::load_config_text("seed: 1\ndata:\n  dataset: image_folder\n  decode: " + decode + "\n" + more,
                                  "exp.yaml");
}

const torch::Device kCuda(torch::kCUDA, 0);
const Files kJpegs({"a/1.jpg", "b/2.JPEG"});
std::string nvjpeg_loaded() { return ""; }

TEST(DecodePlan, AutoPicksTheGpuOnlyWhereNvjpegCanDecodeTheRunsFiles) {
  const data::DecodeChoice gpu = decide_decode(decode_config("auto"), kJpegs, kCuda, nvjpeg_loaded);
  EXPECT_TRUE(gpu.gpu);
  EXPECT_EQ(gpu.why, "auto: image_folder's JPEGs read per batch on CUDA, nvJPEG loaded");
  EXPECT_TRUE(decide_decode(decode_config("gpu"), kJpegs, kCuda, nvjpeg_loaded).gpu);
  const data::DecodeChoice cpu = decide_decode(decode_config("cpu"), kJpegs, kCuda, nvjpeg_loaded);
  EXPECT_FALSE(cpu.gpu);
  EXPECT_EQ(cpu.why, "set");
}

// Each reason auto decodes on the CPU, as the run logs it.
TEST(DecodePlan, AutoSaysWhyItDecodesOnTheCpu) {
  const auto why = [](const config::LoadedConfig& loaded, const data::Dataset& set, const torch::Device& device,
                      const std::function<std::string()>& nvjpeg = nvjpeg_loaded) {
    const data::DecodeChoice choice = decide_decode(loaded, set, device, nvjpeg);
    EXPECT_FALSE(choice.gpu) << choice.why;
    return choice.why;
  };
  // nvJPEG is not even looked for on the CPU.
  EXPECT_EQ(why(decode_config("auto"), kJpegs, torch::kCPU,
                [] {
                  ADD_FAILURE() << "nvJPEG loaded for a CPU run";
                  return std::string();
                }),
            "auto: the run is on the CPU");
  EXPECT_EQ(why(decode_config("auto"), kJpegs, torch::Device(torch::kMPS)), "auto: the run is on mps, not CUDA");
  EXPECT_EQ(why(config::load_config_text("data: {dataset: cifar10}\n", "exp.yaml"), kJpegs, kCuda),
            "auto: data.dataset is cifar10, not image_folder");
  Files held({"a/1.jpg"});
  held.held = true;
  EXPECT_EQ(why(decode_config("auto"), held, kCuda), "auto: the images are decoded once, into memory (data.cache)");
  EXPECT_EQ(why(decode_config("auto"), Files({"a/1.jpg", "b/2.png"}), kCuda), "auto: b/2.png is not a JPEG");
  EXPECT_EQ(why(decode_config("auto", "  augment: {random_crop: 4, reflect: true}\n"), kJpegs, kCuda),
            "auto: data.augment.reflect is on");
  EXPECT_EQ(why(decode_config("auto"), kJpegs, kCuda, [] { return std::string("not found in /x"); }),
            "auto: nvJPEG cannot be used: not found in /x");
}

// gpu where it cannot run stops the run at the key, saying why and the way out.
TEST(DecodePlan, GpuWhereItCannotRunIsAConfigErrorAtTheKey) {
  try {
    decide_decode(decode_config("gpu"), kJpegs, torch::kCPU, nvjpeg_loaded);
    FAIL() << "data.decode: gpu accepted on the CPU";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "data.decode");
    EXPECT_EQ(e.where().line, 4);
    EXPECT_NE(e.problem().find("gpu cannot run here: the run is on the CPU (run on a CUDA device (device: cuda)); set "
                               "data.decode: auto or cpu"),
              std::string::npos)
        << e.problem();
  }
  EXPECT_THROW(decide_decode(decode_config("gpu"), kJpegs, kCuda, [] { return std::string("no library"); }),
               ConfigError);
}

}  // namespace
}  // namespace gputrain::plan
