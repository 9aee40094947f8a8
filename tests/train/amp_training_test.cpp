// Mixed precision through the whole training loop (CPU: bf16 autocast).
#include <gtest/gtest.h>

#include <filesystem>

#include "gputrain/config/load.h"
#include "gputrain/plan/run_plan.h"
#include "gputrain/train/trainer.h"
#include "support/paths.h"

namespace gputrain::train {
namespace {

constexpr const char* kFashionMnist = "/usr/share/datasets/fashion-mnist";

double test_accuracy(const std::string& amp) {
  const auto loaded = config::load_config(std::string(testing::kSourceDir) + "/configs/fashion_mnist.yaml",
                                          {"device=cpu", "train.epochs=2", "train.amp=" + amp, "data.num_workers=1"});
  Trainer trainer(plan::resolve_run(loaded, device::DevicePlan{}, {}));
  TrainObserver quiet;
  return trainer.fit(quiet).last_test.accuracy();
}

TEST(AmpTraining, Bf16OnCpuTrainsFashionMnistWithinOnePointOfFp32) {
  if (!std::filesystem::exists(kFashionMnist))
    GTEST_SKIP() << kFashionMnist << " is missing (scripts/setup.sh installs it)";
  const double fp32 = test_accuracy("off");
  const double bf16 = test_accuracy("bf16");
  EXPECT_GT(fp32, 0.84);
  EXPECT_NEAR(bf16, fp32, 0.01) << "fp32 " << fp32 << " bf16 " << bf16;
}

TEST(AmpTraining, Fp16WhereAutoChoseTheCpuIsAConfigError) {
  const auto loaded = config::load_config_text(
      "device: auto\ndata: {dataset: synthetic, num_workers: 0, pin_memory: false}\nmodel: {name: mlp}\n"
      "train: {amp: fp16}\n",
      "amp.yaml");
  try {
    Trainer trainer(plan::resolve_run(loaded, device::DevicePlan{}, {}));
    FAIL() << "fp16 on the CPU was accepted";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("amp.yaml:4:14: train.amp: fp16 autocast needs CUDA; on CPU use bf16"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
}  // namespace gputrain::train
