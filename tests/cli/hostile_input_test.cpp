// Round 4 of hostile input (issue 56 #4), through the real binary: exports onto
// odd names and full disks or killed part-way, weights files that are symbolic
// link loops, signals, sweeps run again. Each must end in one clean message and
// lose nothing that was there before.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "gputrain/data/export.h"
#include "support/process.h"
#include "support/temp_dir.h"

namespace gputrain::testing {
namespace {

namespace fs = std::filesystem;

// Every child runs its tiny ops on one thread: OpenMP's spinning workers slow them tenfold on a busy machine.
const std::map<std::string, std::string> kEnv{{"OMP_NUM_THREADS", "1"}};

// One seed_mlp run (1,474 parameters) for the whole suite: its best checkpoint is what each test exports.
class HostileExport : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    runs_ = new TempDir("hostile-export");
    const ProcessResult r =
        run_gputrain({"--log-level", "warn", "train", "--config", "configs/seed_mlp.yaml", "--output",
                      runs_->path().string(), "--set", "device=cpu", "--set", "train.epochs=1"},
                     kEnv);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  static void TearDownTestSuite() {
    delete runs_;
    runs_ = nullptr;
  }
  static std::string checkpoint() { return (runs_->path() / "seed-mlp" / "checkpoints" / "best.ckpt").string(); }
  static ProcessResult run_export(const std::string& format, const fs::path& out, std::vector<std::string> more = {},
                                  const ChildSetup& setup = {}) {
    std::vector<std::string> args{"--log-level", "warn", "export", "--checkpoint", checkpoint(),
                                  "--format",    format, "--out",  out.string()};
    args.insert(args.end(), more.begin(), more.end());
    return run_gputrain(args, kEnv, kSourceDir, setup);
  }

  static TempDir* runs_;
  TempDir dir_{"hostile-export-out"};
};
TempDir* HostileExport::runs_ = nullptr;

// A name of 255 bytes, the most a file name may have: its temporary's name
// (".<name>.tmp-<pid>-<n>") was longer, and the export failed with "File name too long".
TEST_F(HostileExport, AFileNameOfTheLongestLengthIsWritten) {
  for (const std::string format : {"onnx", "safetensors"}) {
    const std::string extension = "." + format;
    const fs::path out = dir_ / (std::string(255 - extension.size(), 'm') + extension);
    const ProcessResult r = run_export(format, out);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_TRUE(fs::is_regular_file(out)) << format;
  }
  EXPECT_FALSE(has_temporary(dir_.path()));
}

// An --out that is a directory was "exists; add --force to replace it", and
// with --force "is a directory, not a file": said at once now.
TEST_F(HostileExport, AnOutThatIsADirectoryIsSaidAtOnce) {
  for (const std::string format : {"safetensors", "onnx"}) {
    const ProcessResult r = run_export(format, dir_.path());
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("--out " + dir_.path().string() + ": is a directory, not a file; give the path of a file"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("add --force"), std::string::npos) << r.err;
  }
}

// --format pytorch writes a module and its weights. Where the weights do not
// fit (a full disk), an earlier export's pair stays whole: the module was
// replaced, then removed when its weights failed, leaving the weights alone.
TEST_F(HostileExport, APytorchExportThatDoesNotFitLeavesTheEarlierPairWhole) {
  const fs::path module = dir_ / "model.py", weights = dir_ / "model.pt";
  ASSERT_EQ(run_export("pytorch", module).exit_code, 0);
  const std::string module_text = read_text(module), weights_bytes = read_text(weights);
  ASSERT_LT(module_text.size(), 4096u);
  ASSERT_GT(weights_bytes.size(), 4096u);
  // 4 KiB holds the module but not its weights.
  const ProcessResult r = run_export("pytorch", module, {"--force"}, file_size_limit(4096));
  if (r.exit_code == kSetupFailed) GTEST_SKIP() << "cannot limit file sizes here (setrlimit refused)";
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("model.pt: cannot write: File too large"), std::string::npos) << r.err;
  ASSERT_TRUE(fs::exists(module)) << "the earlier export's module is gone";
  EXPECT_EQ(read_text(module), module_text);
  EXPECT_EQ(read_text(weights), weights_bytes);
  EXPECT_FALSE(has_temporary(dir_.path()));
}

// A pytorch export killed part-way (kill -9) must not leave a module without
// its weights, which looks like a finished export, and which the next export
// then refused as existing: the weights are written first, the module last.
TEST_F(HostileExport, AKilledPytorchExportLeavesNoModuleWithoutItsWeights) {
  const fs::path module = dir_ / "model.py";
  // gputrain whose every write pauses a minute half-way (paused_writes_main.cpp).
  GputrainProcess child({"export", "--checkpoint", checkpoint(), "--format", "pytorch", "--out", module.string()}, kEnv,
                        kSourceDir, {}, kPausedWritesBinary);
  ASSERT_TRUE(wait_until([&] { return child.err_so_far().find("test hook: pausing") != std::string::npos; }))
      << child.err_so_far();
  // The first file written is the weights, so that whenever the module is in place, they are whole.
  EXPECT_NE(child.err_so_far().find("in the middle of writing " + (dir_ / "model.pt").string()), std::string::npos)
      << child.err_so_far();
  child.send(SIGKILL);
  child.wait();
  EXPECT_FALSE(fs::exists(module));
  EXPECT_FALSE(fs::exists(dir_ / "model.pt"));
  // The next export to the same place is whole, and leaves no temporary of the killed one behind.
  const ProcessResult again = run_export("pytorch", module);
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_TRUE(fs::is_regular_file(module));
  EXPECT_TRUE(fs::is_regular_file(dir_ / "model.pt"));
  EXPECT_FALSE(has_temporary(dir_.path()));
}

// The module is imported by its file's name: a keyword does not parse
// (`from import import Model`), and torch.py would be imported for torch itself.
TEST_F(HostileExport, AModuleNamePythonCannotImportIsRefused) {
  for (const std::string stem : {"import", "class", "torch"}) {
    const ProcessResult r = run_export("pytorch", dir_ / (stem + ".py"));
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_NE(r.err.find("'" + stem + "' cannot name the Python module"), std::string::npos) << r.err;
  }
  EXPECT_TRUE(fs::is_empty(dir_.path()));
}

// A weights file that is a symbolic link loop is named as one (it was an
// internal error, exit 1, in test, predict and export).
TEST_F(HostileExport, ASymbolicLinkLoopForWeightsIsNamed) {
  const fs::path loop = dir_ / "loop.ckpt";
  fs::create_symlink(dir_ / "other.ckpt", loop);
  fs::create_symlink(loop, dir_ / "other.ckpt");
  const fs::path input = dir_ / "x.csv";
  write_text(input, "1,2\n");
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"test", "--checkpoint", loop.string()},
        std::vector<std::string>{"predict", "--checkpoint", loop.string(), "--input", input.string()},
        std::vector<std::string>{"export", "--checkpoint", loop.string(), "--format", "onnx", "--out",
                                 (dir_ / "m.onnx").string()}}) {
    const ProcessResult r = run_gputrain(command, kEnv);
    EXPECT_EQ(r.exit_code, 2) << command[0] << ": " << r.err;
    EXPECT_NE(r.err.find("loop.ckpt: is a symbolic link loop"), std::string::npos) << command[0] << ": " << r.err;
    EXPECT_EQ(r.err.find("internal error"), std::string::npos) << command[0] << ": " << r.err;
  }
}

// SIGHUP asks `train` for a checkpoint and carries on (app/signals.h), also
// while the run still sets up: there its default action ended the run with 129
// and nothing said (and, relayed by `sweep`, the sweep's current run). The
// config comes through a FIFO: once this test's open for writing returns, the
// child is reading it, so it is in its setup.
TEST(HostileSignals, AHangupWhileTrainSetsUpCheckpointsAtTheFirstStepAndCarriesOn) {
  TempDir dir("hostile-hangup");
  const fs::path fifo = dir / "config.fifo";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  GputrainProcess child({"train", "--config", fifo.string(), "--output", dir.path().string(), "--set", "device=cpu",
                         "--set", "train.epochs=1"},
                        kEnv);
  const int fd = ::open(fifo.c_str(), O_WRONLY);  // blocks until the child opens it
  ASSERT_GE(fd, 0);
  child.send(SIGHUP);
  const std::string config = read_text(fs::path(kSourceDir) / "configs" / "seed_mlp.yaml");
  ASSERT_EQ(::write(fd, config.data(), config.size()), static_cast<ssize_t>(config.size()));
  ::close(fd);
  const ProcessResult r = child.wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_regular_file(dir / "seed-mlp" / "checkpoints" / "ckpt-s00000001-e0000-b000001.ckpt")) << r.err;
  EXPECT_TRUE(fs::is_regular_file(dir / "seed-mlp" / "model.pt")) << r.err;
}

// Whether `pid` has a handler for `signal` (its SigCgt mask in /proc).
bool catches(pid_t pid, int signal) {
  const std::string status = read_text(fs::path("/proc") / std::to_string(pid) / "status");
  const std::size_t at = status.find("SigCgt:");
  if (at == std::string::npos) return false;
  return ((std::stoull(status.substr(at + 7), nullptr, 16) >> (signal - 1)) & 1) != 0;
}

// The same while gputrain loads, before `train` sets up: LibTorch's
// initialisers take about a second after the first handlers go in (SIGUSR1's,
// app/main.cpp), and there SIGHUP's default action ended the run with 129 and
// nothing said. A command with nothing to checkpoint still ends on it.
TEST(HostileSignals, AHangupWhileGputrainLoadsCheckpointsAtTheFirstStepAndCarriesOn) {
  TempDir dir("hostile-hangup-load");
  GputrainProcess child({"train", "--config", (fs::path(kSourceDir) / "configs" / "seed_mlp.yaml").string(), "--output",
                         dir.path().string(), "--set", "device=cpu", "--set", "train.epochs=1"},
                        kEnv);
  ASSERT_TRUE(wait_until([&] { return catches(child.pid(), SIGUSR1); }));
  child.send(SIGHUP);
  const ProcessResult r = child.wait();
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(fs::is_regular_file(dir / "seed-mlp" / "checkpoints" / "ckpt-s00000001-e0000-b000001.ckpt")) << r.err;

  GputrainProcess listing({"configs"}, kEnv);
  ASSERT_TRUE(wait_until([&] { return catches(listing.pid(), SIGUSR1); }));
  listing.send(SIGHUP);
  EXPECT_EQ(listing.wait().exit_code, 128 + SIGHUP);
}

// `gputrain plan` and `train` on `config` (a YAML text written to dir/config.yaml), each to its end.
std::vector<ProcessResult> plan_and_train(const fs::path& dir, const std::string& config) {
  const fs::path file = write_text(dir / "config.yaml", config);
  std::vector<ProcessResult> results;
  for (const std::string command : {"plan", "train"}) {
    results.push_back(run_gputrain(
        {"--log-level", "warn", command, "--config", file.string(), "--set", "output.dir=" + (dir / "runs").string()},
        kEnv));
  }
  return results;
}

// With augment.random_resized_crop the training images are sized apart from
// the test split's (data.resize, data.center_crop), and the model sees one
// shape: a test split of another size stopped the run at its first evaluation
// with LibTorch's "mat1 and mat2 shapes cannot be multiplied" (exit 1), while
// `plan` said "no problems".
TEST(HostilePlan, ATestSplitSizedApartFromTheRandomResizedCropIsRefusedAtItsKey) {
  TempDir dir("hostile-crop");
  const fs::path images = make_image_folder(dir.path(), "png", 32, 16);  // 28 x 28 grey
  const std::string head =
      "name: crop\nseed: 0\ndevice: cpu\ndata:\n  dataset: image_folder\n  root: " + images.string() +
      "\n  batch_size: 16\n  augment: {random_resized_crop: {size: 28}}\n";
  const std::string model = "model: {layers: [flatten, {type: linear}]}\ntrain: {epochs: 1}\n";
  for (const auto& [sizing, key, shape] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"  resize: 32\n", "data.resize", "1x32x32"}, {"  center_crop: [20]\n", "data.center_crop", "1x20x20"}}) {
    for (const ProcessResult& r : plan_and_train(dir.path(), head + sizing + model)) {
      EXPECT_EQ(r.exit_code, 2) << r.err << r.out;
      EXPECT_NE((r.err + r.out)
                    .find("config.yaml:9:" + std::string(key == "data.resize" ? "11" : "16") + ": " + key +
                          ": gives the test split " + shape + " images, but the training split's are 1x28x28"),
                std::string::npos)
          << r.err << r.out;
      EXPECT_NE((r.err + r.out).find("set data.center_crop: [28, 28]"), std::string::npos) << r.err << r.out;
    }
  }
  // Resized, then cut to the crop's size: torchvision's recipe, which runs.
  const std::vector<ProcessResult> recipe =
      plan_and_train(dir.path(), head + "  resize: 32\n  center_crop: [28]\n" + model);
  EXPECT_EQ(recipe[0].exit_code, 0) << recipe[0].err << recipe[0].out;
  EXPECT_EQ(recipe[1].exit_code, 0) << recipe[1].err;
}

// A whitening first layer reads the training images' pixel bytes; float
// samples (npy float32 [N, 1, 8, 8]) have none: that was an internal error at
// run start (exit 1), and `plan` said "no problems".
TEST(HostilePlan, WhiteningFloatSamplesIsRefusedAtTheLayer) {
  TempDir dir("hostile-whiten");
  const fs::path root = dir / "npy";
  fs::create_directories(root);
  data::write_npy(root / "train_inputs.npy", torch::rand({32, 1, 8, 8}));
  data::write_npy(root / "train_targets.npy", torch::randint(0, 2, {32}, torch::kInt64));
  data::write_npy(root / "test_inputs.npy", torch::rand({8, 1, 8, 8}));
  data::write_npy(root / "test_targets.npy", torch::randint(0, 2, {8}, torch::kInt64));
  const std::string config = "name: whiten\nseed: 0\ndevice: cpu\ndata: {dataset: npy, root: " + root.string() +
                             ", batch_size: 8}\nmodel:\n  layers:\n"
                             "    - {type: conv2d, out_channels: 18, kernel: 3, whiten: 16}\n"
                             "    - flatten\n    - {type: linear}\ntrain: {epochs: 1}\n";
  for (const ProcessResult& r : plan_and_train(dir.path(), config)) {
    EXPECT_EQ(r.exit_code, 2) << r.err << r.out;
    EXPECT_NE((r.err + r.out)
                  .find("config.yaml:7:7: model.layers[0] (conv2d): `whiten` computes its filters from the "
                        "training images' pixels, and data set 'npy' holds no images"),
              std::string::npos)
        << r.err << r.out;
    EXPECT_EQ((r.err + r.out).find("internal error"), std::string::npos) << r.err << r.out;
  }
}

// A weights file is judged without being read whole: 8 GB (a sparse file) behind a valid safetensors header
// or a zip's magic were read into memory before they were refused, and the kernel ended the process for memory
// (exit 137; under a data limit, "out of memory ... make the model smaller").
TEST(HostileInitFrom, AHugeFileIsJudgedWithoutReadingItWhole) {
  TempDir dir("hostile-huge");
  const std::string header = R"({"fc1.weight":{"dtype":"F32","shape":[64,20],"data_offsets":[0,5120]}})";
  std::string safetensors(8, '\0');
  for (std::size_t i = 0; i < 8; ++i) safetensors[i] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
  safetensors += header + std::string(5120, '\0');
  const std::map<std::string, std::pair<std::string, std::string>> files{
      {"huge.safetensors", {safetensors, "bytes after its last tensor belong to no tensor"}},
      {"huge.pt", {"PK\x03\x04", "failed finding central directory"}}};
  // Heap and other writable memory of at most 2 GB: a file mapped to be read is not counted.
  const ChildSetup two_gigabytes = [] {
    const rlimit limit{std::size_t{2} << 30, std::size_t{2} << 30};
    if (setrlimit(RLIMIT_DATA, &limit) != 0) _exit(kSetupFailed);
  };
  for (const auto& [name, content] : files) {
    const fs::path file = write_text(dir / name, content.first);
    fs::resize_file(file, std::uintmax_t{8} << 30);  // sparse: no disk space taken
    const ProcessResult r =
        run_gputrain({"plan", "--config", "configs/seed_mlp.yaml", "--set", "device=cpu", "--set",
                      "output.dir=" + (dir / "runs").string(), "--set", "model.init_from=" + file.string()},
                     kEnv, kSourceDir, two_gigabytes);
    if (r.exit_code == kSetupFailed) GTEST_SKIP() << "cannot limit the data segment here";
    EXPECT_EQ(r.exit_code, 2) << r.err << r.out;
    EXPECT_NE(r.out.find("model.init_from: " + file.string() + ": "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(content.second), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("out of memory"), std::string::npos) << r.out;
  }
}

}  // namespace
}  // namespace gputrain::testing
