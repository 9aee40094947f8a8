// Issue 17 #8: the host running out of memory or threads (a memory limit,
// ulimit -v) says what ran out and which key to lower, as a user error (exit
// 2), wherever it happens: loading the data, starting the loader's workers,
// building the model, a training step. Each case runs in a child process
// under an address-space limit a little above what it uses already.
#include <gtest/gtest.h>
#include <malloc.h>
#include <sys/resource.h>
#include <torch/torch.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <new>
#include <system_error>

#include "gputrain/checkpoint/weights.h"
#include "gputrain/common/error.h"
#include "gputrain/config/load.h"
#include "gputrain/data/dataset.h"
#include "gputrain/data/host_loader.h"
#include "gputrain/device/host_resources.h"
#include "gputrain/device/resolve.h"
#include "gputrain/plan/run_plan.h"
#include "gputrain/train/evaluate.h"
#include "gputrain/train/trainer.h"
#include "support/process.h"
#include "support/temp_dir.h"
#include "train/synthetic_run.h"

// These tests run the host out of memory on purpose. Under AddressSanitizer a
// failed allocation must come back as null (bad_alloc, c10's enforce) the way
// it does in a release build, not end the process with a report.
#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define GPUTRAIN_UNDER_ASAN
#endif
#endif
#if defined(GPUTRAIN_UNDER_ASAN) || defined(__SANITIZE_ADDRESS__)
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
#endif

namespace gputrain::train {
namespace {

namespace fs = std::filesystem;

using testing::ProcessResult;
using testing::run_in_child;

// Limits the calling process's address space to what it maps now plus `headroom`.
void limit_address_space(std::size_t headroom) {
  std::ifstream statm("/proc/self/statm");
  std::size_t pages = 0;
  statm >> pages;
  const rlimit limit{pages * static_cast<std::size_t>(::sysconf(_SC_PAGESIZE)) + headroom, RLIM_INFINITY};
  if (pages == 0 || ::setrlimit(RLIMIT_AS, &limit) != 0) ::_exit(testing::kSetupFailed);
}

// Runs `action` in a child, the limit set after `prepare`: "UserError: <what>"
// when it throws one, else what it threw or returned.
ProcessResult under_memory_limit(const std::function<void()>& prepare, const std::function<void()>& action,
                                 std::size_t headroom = std::size_t{64} << 20) {
  return run_in_child([&] {
    // OpenMP aborts the process when it cannot start its threads: none here.
    torch::set_num_threads(1);
    // Every thread allocates from the main arena: a thread that did start
    // would otherwise reserve a 64 MiB arena of its own for its first malloc,
    // and glibc aborts ("failed to register TLS destructor: out of memory")
    // when that fails — about 1 run in 60 of the loader-workers test.
    mallopt(M_ARENA_MAX, 1);
    prepare();
    limit_address_space(headroom);
    try {
      action();
    } catch (const UserError& e) {
      return std::string("UserError: ") + e.what();
    }
    return std::string("no error");
  });
}

bool has(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

config::LoadedConfig tiny(const std::vector<std::string>& overrides) {
  return config::load_config_text(R"(
seed: 1
device: cpu
data: {dataset: synthetic, samples: 64, test_samples: 16, features: 8, classes: 2, batch_size: 16, num_workers: 0,
       pin_memory: false}
model: {name: mlp, hidden: [8]}
train: {epochs: 1, log_every: 1000}
)",
                                  "tiny.yaml", overrides);
}

// The child ended normally, having caught a UserError whose message holds every one of `parts`.
void expect_user_error(const ProcessResult& r, const std::vector<std::string>& parts) {
  EXPECT_EQ(r.exit_code, 0) << r.out;
  for (const std::string& part : parts) EXPECT_TRUE(has(r.out, part)) << "no \"" << part << "\" in: " << r.out;
}

#define SKIP_UNLESS_SET_UP(r) \
  if ((r).exit_code == testing::kSetupFailed) GTEST_SKIP() << "cannot limit the address space here"

TEST(HostResources, LoadingTooLargeADataSetSaysLowerSamples) {
  const auto r = under_memory_limit(
      [] {}, [] { Trainer(plan::resolve_run(tiny({"data.samples=100000000"}), device::DevicePlan{}, {})); });
  SKIP_UNLESS_SET_UP(r);
  expect_user_error(
      r, {"UserError: loading the training split of synthetic: out of memory (", "ulimit -v", "Lower data.samples."});
}

TEST(HostResources, BuildingTooLargeAModelSaysMakeItSmaller) {
  const auto r = under_memory_limit(
      [] {}, [] { Trainer(plan::resolve_run(tiny({"model.hidden=[20000, 20000]"}), device::DevicePlan{}, {})); });
  SKIP_UNLESS_SET_UP(r);
  expect_user_error(
      r, {"UserError: building the model (mlp) on the CPU to trace it: out of memory (", "Make the model smaller"});
}

TEST(HostResources, ATrainingStepTooLargeSaysLowerTheBatch) {
  std::unique_ptr<Trainer> trainer;
  const auto r = under_memory_limit(
      [&] {
        // 32 MB of inputs, all of it one batch of 4096 x 2048 floats for the step.
        trainer = std::make_unique<Trainer>(plan::resolve_run(
            tiny({"data.samples=4096", "data.features=2048", "data.batch_size=4096", "model.hidden=[2048]"}),
            device::DevicePlan{}, {}));
      },
      [&] {
        TrainObserver quiet;
        trainer->fit(quiet);
      },
      std::size_t{16} << 20);
  SKIP_UNLESS_SET_UP(r);
  expect_user_error(r, {"UserError: training at data.batch_size 4096 with 0 loader workers: out of memory (",
                        "Lower data.batch_size"});
}

TEST(HostResources, TestingWithTooLargeABatchSaysLowerTheBatch) {
  testing::TempDir dir;
  const fs::path weights = dir / "model.pt";
  // One test batch of 4096 samples makes 256 MB of hidden activations.
  const auto loaded = tiny({"data.test_samples=4096", "data.test_batch_size=4096", "model.hidden=[16384]"});
  const auto r = under_memory_limit(
      [&] {
        checkpoint::save_weights(Trainer(plan::resolve_run(loaded, device::DevicePlan{}, {})).model(),
                                 weights.string());
      },
      [&] { (void)evaluate_saved_weights(saved_model_plan(loaded, plan::Purpose::kEvaluate), weights.string()); });
  SKIP_UNLESS_SET_UP(r);
  expect_user_error(r, {"UserError: testing at data.test_batch_size 4096 with 0 loader workers: out of memory (",
                        "Lower data.test_batch_size, data.num_workers, or the model's size."});
}

TEST(HostResources, LoaderWorkersThatCannotStartSayLowerNumWorkers) {
  std::shared_ptr<const data::Dataset> dataset;
  const auto r = under_memory_limit(
      [&] {
        config::DataConfig c;
        c.dataset = config::DatasetName::kSynthetic;
        c.samples = 4096;
        c.features = 4;
        dataset = data::make_dataset(c, data::Split::kTrain, 0);
      },
      [&] {
        data::LoaderOptions options;
        options.batch_size = 1;
        options.num_workers = 1000;  // 8 MB of stack each: far beyond the limit
        options.pin_memory = false;
        data::HostLoader stream(dataset, options);
        stream.start_epoch(0);
      });
  SKIP_UNLESS_SET_UP(r);
  expect_user_error(r, {"UserError: starting data loader worker ",
                        " of 1000 (data.num_workers): cannot start a thread (", "Lower data.num_workers."});
}

// What is not the host running out passes through unchanged.
TEST(HostResources, OtherErrorsPassThrough) {
  const auto convert = [](const std::function<void()>& fault) {
    device::with_resource_errors("doing it", "Lower x", fault);
  };
  EXPECT_THROW(convert([] { throw std::bad_alloc(); }), UserError);
  const auto no_thread = std::make_error_code(std::errc::resource_unavailable_try_again);
  EXPECT_THROW(convert([&] { throw std::system_error(no_thread); }), UserError);
  EXPECT_THROW(convert([] { (void)torch::empty({int64_t{1} << 52}, torch::kUInt8); }), UserError);  // 4 PiB
  EXPECT_THROW(convert([] { throw std::system_error(std::make_error_code(std::errc::invalid_argument)); }),
               std::system_error);
  EXPECT_THROW(convert([] { throw std::runtime_error("other"); }), std::runtime_error);
  EXPECT_THROW(convert([] { throw ConfigError({}, "k", "bad"); }), ConfigError);
  try {
    convert([] { throw std::bad_alloc(); });
  } catch (const UserError& e) {
    EXPECT_EQ(e.code(), ExitCode::kUserInput);
    EXPECT_TRUE(has(e.what(), "doing it: out of memory (std::bad_alloc; ")) << e.what();
    EXPECT_TRUE(has(e.what(), "). Lower x.")) << e.what();
  }
}

}  // namespace
}  // namespace gputrain::train
