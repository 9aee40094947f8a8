// A checkpoint's contents survive the round trip exactly; damaged or foreign
// contents are CheckpointErrors naming the file; the resume config is checked.
#include "gputrain/checkpoint/checkpoint.h"

#include <gtest/gtest.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/sgd.h>
#include <torch/serialize.h>
#include <torch/serialize/output-archive.h>

#include <functional>
#include <map>

#include "gputrain/checkpoint/format.h"
#include "gputrain/checkpoint/resume.h"
#include "gputrain/checkpoint/store.h"
#include "gputrain/checkpoint/weights.h"
#include "gputrain/common/error.h"
#include "gputrain/config/load.h"
#include "support/temp_dir.h"

namespace gputrain::checkpoint {
namespace {

using testing::TempDir;

const char* const kConfig = R"(
name: tiny
device: cpu
data: {dataset: synthetic, features: 3, classes: 2}
model: {name: mlp, hidden: [4]}
)";

// A small model and an SGD with momentum that has taken one step, so the
// optimizer has state worth restoring.
struct Tiny {
  torch::nn::Sequential model{torch::nn::Sequential()};
  std::unique_ptr<torch::optim::SGD> optimizer;

  explicit Tiny(int64_t hidden = 4, uint64_t seed = 1) {
    torch::manual_seed(seed);
    model->push_back("fc1", torch::nn::Linear(3, hidden));
    model->push_back("fc2", torch::nn::Linear(hidden, 2));
    optimizer = std::make_unique<torch::optim::SGD>(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  }
  void step() {
    optimizer->zero_grad();
    model->forward(torch::randn({5, 3})).pow(2).sum().backward();
    optimizer->step();
  }
};

TrainingState sample_state(const std::string& config = kConfig) {
  TrainingState s;
  s.position = {2, 5, 21};
  s.epoch_sums.loss = torch::tensor(1.25f);
  s.epoch_sums.correct = torch::tensor(int64_t{7});
  s.epoch_sums.samples = 40;
  s.interval_sums.samples = 0;  // nothing summed yet: undefined tensors
  s.scaler = {{"scale", 1024.0}, {"growth_tracker", 3.0}};
  s.rng = capture_rng();
  s.best_score = 0.75;
  s.skipped_steps = 2;
  s.config = config::dump_config(config::load_config_text(config, "c.yaml").config);
  return s;
}

std::string encoded(const TrainingState& state = sample_state()) {
  Tiny tiny;
  tiny.step();
  return encode(state, *tiny.model, *tiny.optimizer);
}

std::string error_of(const std::function<void()>& action) {
  try {
    action();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

TEST(Checkpoint, EveryPartComesBackExactly) {
  Tiny trained;
  trained.step();
  const TrainingState state = sample_state();
  const Checkpoint c = Checkpoint::parse(encode(state, *trained.model, *trained.optimizer), "c.ckpt");
  const TrainingState& back = c.state();
  EXPECT_EQ(back.position.epoch, 2);
  EXPECT_EQ(back.position.batch, 5);
  EXPECT_EQ(back.position.step, 21);
  EXPECT_TRUE(torch::equal(back.epoch_sums.loss, state.epoch_sums.loss));
  EXPECT_EQ(back.epoch_sums.loss.scalar_type(), torch::kFloat32);
  EXPECT_TRUE(torch::equal(back.epoch_sums.correct, state.epoch_sums.correct));
  EXPECT_EQ(back.epoch_sums.samples, 40);
  EXPECT_FALSE(back.interval_sums.loss.defined());
  EXPECT_EQ(back.scaler, state.scaler);
  EXPECT_TRUE(torch::equal(back.rng.cpu, state.rng.cpu));
  EXPECT_EQ(back.best_score, 0.75);
  EXPECT_EQ(back.skipped_steps, 2);
  EXPECT_EQ(back.config, state.config);
  EXPECT_FALSE(back.torch_version.empty());
  EXPECT_FALSE(back.gputrain_version.empty());

  Tiny fresh(4, 2);
  ASSERT_FALSE(torch::equal(fresh.model->parameters()[0], trained.model->parameters()[0]));
  c.load_model(*fresh.model);
  c.load_optimizer(*fresh.optimizer, torch::kCPU);
  for (std::size_t i = 0; i < fresh.model->parameters().size(); ++i) {
    EXPECT_TRUE(torch::equal(fresh.model->parameters()[i], trained.model->parameters()[i])) << i;
  }
  // Same momentum: one more identical step keeps them identical.
  torch::manual_seed(5);
  trained.step();
  torch::manual_seed(5);
  fresh.step();
  for (std::size_t i = 0; i < fresh.model->parameters().size(); ++i) {
    EXPECT_TRUE(torch::equal(fresh.model->parameters()[i], trained.model->parameters()[i])) << i;
  }
  EXPECT_EQ(c.weights().size(), 4u);
  EXPECT_EQ(c.weights().front().first, "fc1.weight");
}

TEST(Checkpoint, RestoredRngRepeatsTheDraws) {
  const RngState saved = capture_rng();
  const torch::Tensor first = torch::rand({4});
  restore_rng(saved);
  EXPECT_TRUE(torch::equal(torch::rand({4}), first));
}

TEST(Checkpoint, IntactEnvelopeAroundBadContentsIsAnError) {
  EXPECT_NE(error_of([] {
              Checkpoint::parse(seal("not an archive"), "x.ckpt");
            }).find("x.ckpt: the checksum matches but LibTorch cannot read the contents"),
            std::string::npos);
  torch::serialize::OutputArchive archive;  // a LibTorch archive, but not a checkpoint
  archive.write("position_epoch", int64_t{1});
  std::string payload;
  archive.save_to([&payload](const void* data, std::size_t size) {
    payload.append(static_cast<const char*>(data), size);
    return size;
  });
  EXPECT_NE(error_of([&] {
              Checkpoint::parse(seal(payload), "y.ckpt");
            }).find("y.ckpt: has no 'position_batch' entry (not a complete checkpoint)"),
            std::string::npos);
}

TEST(Checkpoint, ReadNamesMissingAndDamagedFiles) {
  TempDir dir;
  EXPECT_NE(error_of([&] { Checkpoint::read(dir / "none.ckpt"); }).find("none.ckpt: no such file"), std::string::npos);
  std::string bytes = encoded();
  bytes.resize(bytes.size() / 2);
  testing::write_text(dir / "half.ckpt", bytes);
  EXPECT_NE(error_of([&] { Checkpoint::read(dir / "half.ckpt"); }).find("half.ckpt: truncated"), std::string::npos);
}

TEST(Checkpoint, WeightsOfAnotherShapeAreRefused) {
  const Checkpoint c = Checkpoint::parse(encoded(), "c.ckpt");
  Tiny wider(5);
  EXPECT_NE(error_of([&] {
              c.load_model(*wider.model);
            }).find("c.ckpt: 'fc1.weight' has shape [4, 3] but the model expects [5, 3]"),
            std::string::npos);
  torch::nn::Sequential fewer;
  fewer->push_back("fc1", torch::nn::Linear(3, 4));
  EXPECT_NE(error_of([&] { c.load_model(*fewer); }).find("holds 'fc2.bias', which the model does not have"),
            std::string::npos);
}

TEST(Weights, ModelPtAndCheckpointBothLoadAndExport) {
  TempDir dir;
  Tiny trained;
  trained.step();
  save_weights(trained.model, (dir / "model.pt").string());
  testing::write_text(dir / "c.ckpt", encode(sample_state(), *trained.model, *trained.optimizer));
  for (const char* file : {"model.pt", "c.ckpt"}) {
    Tiny fresh(4, 2);
    load_weights(fresh.model, (dir / file).string());
    EXPECT_TRUE(torch::equal(fresh.model->parameters()[0], trained.model->parameters()[0])) << file;
    const ExportSummary summary =
        export_weights((dir / file).string(), (dir / "export.pt").string(), {ExportedWeights::kEvaluated, true});
    EXPECT_EQ(summary.tensors, 4);
    EXPECT_EQ(summary.elements, 3 * 4 + 4 + 4 * 2 + 2);
  }
  testing::write_text(dir / "junk.pt", "junk");
  EXPECT_NE(error_of([&] {
              Tiny t;
              load_weights(t.model, (dir / "junk.pt").string());
            }).find("junk.pt: neither a gputrain checkpoint nor a LibTorch weights archive"),
            std::string::npos);
}

// The tensors of a file export_weights wrote, by name.
std::map<std::string, torch::Tensor> exported(const std::filesystem::path& file) {
  const std::string bytes = testing::read_text(file);
  const c10::IValue dict = torch::pickle_load(std::vector<char>(bytes.begin(), bytes.end()));
  std::map<std::string, torch::Tensor> out;
  for (const auto& entry : dict.toGenericDict()) out.emplace(entry.key().toStringRef(), entry.value().toTensor());
  return out;
}

// Issue 37 #7: a train.ema run exports the average that test and model.pt
// use, unless --weights live asks for the optimizer's weights. The model nests
// BatchNorm (buffers) in a block, so that the average's order (parameters,
// then buffers) and the archive's (per module) differ.
TEST(Weights, ExportWritesTheEvaluatedAverageOrTheLiveWeightsAsAsked) {
  TempDir dir;
  // A block of its own (registered, as a residual block is) between two layers.
  const auto nested = [] {
    torch::nn::Sequential block;
    block->push_back("fc", torch::nn::Linear(4, 4));
    block->push_back("bn", torch::nn::BatchNorm1d(4));
    torch::nn::Sequential model;
    model->push_back("fc1", torch::nn::Linear(3, 4));
    model->push_back("bn1", torch::nn::BatchNorm1d(4));
    model->register_module("block", block);
    model->push_back("fc2", torch::nn::Linear(4, 2));
    return model;
  };
  torch::manual_seed(2);
  torch::nn::Sequential model = nested();
  model->forward(torch::randn({5, 3}));  // running statistics that are not the initial ones
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1));
  TrainingState state = sample_state();
  for (const torch::Tensor& p : model->parameters()) state.ema.push_back(p.detach() * 2 + 1);
  for (const torch::Tensor& b : model->buffers()) state.ema.push_back(b.detach() + 3);
  testing::write_text(dir / "ema.ckpt", encode(state, *model, optimizer));

  torch::nn::Sequential evaluated = nested();  // load_weights maps the average by the model's own order
  load_weights(evaluated, (dir / "ema.ckpt").string());
  const ExportSummary average =
      export_weights((dir / "ema.ckpt").string(), (dir / "ema.pt").string(), {ExportedWeights::kEvaluated, false});
  EXPECT_NE(average.weights.find("train.ema"), std::string::npos) << average.weights;
  const auto written = exported(dir / "ema.pt");
  ASSERT_EQ(written.size(), model->named_parameters().size() + model->named_buffers().size());
  for (const auto& p : evaluated->named_parameters())
    EXPECT_TRUE(torch::equal(written.at(p.key()), p.value())) << p.key();
  for (const auto& b : evaluated->named_buffers()) EXPECT_TRUE(torch::equal(written.at(b.key()), b.value())) << b.key();

  const ExportSummary live =
      export_weights((dir / "ema.ckpt").string(), (dir / "live.pt").string(), {ExportedWeights::kLive, false});
  EXPECT_NE(live.weights.find("live"), std::string::npos) << live.weights;
  const auto raw = exported(dir / "live.pt");
  for (const auto& p : model->named_parameters()) EXPECT_TRUE(torch::equal(raw.at(p.key()), p.value())) << p.key();

  testing::write_text(dir / "plain.ckpt", encoded());
  EXPECT_NE(
      error_of([&] {
        export_weights((dir / "plain.ckpt").string(), (dir / "x.pt").string(), {ExportedWeights::kAverage, false});
      }).find("holds no weight average"),
      std::string::npos);
}

TEST(Store, NewestValidSkipsDamagedCheckpoints) {
  TempDir dir;
  CheckpointStore store(dir.path(), 5, std::nullopt);
  EXPECT_FALSE(newest_valid(dir.path()).has_value());
  const std::string bytes = encoded();
  store.save({1, 0, 8}, bytes);
  const auto newer = store.save({2, 0, 16}, bytes);
  testing::write_text(newer, bytes.substr(0, bytes.size() - 10));  // cut short
  const std::optional<Checkpoint> found = newest_valid(dir.path());
  ASSERT_TRUE(found.has_value());
  EXPECT_NE(found->name().find("ckpt-s00000008-e0001-b000000.ckpt"), std::string::npos) << found->name();
  testing::write_text(dir / "ckpt-s00000008-e0001-b000000.ckpt", "garbage");
  EXPECT_NE(error_of([&] { newest_valid(dir.path()); }).find("none of its 2 checkpoints is intact"), std::string::npos);
}

config::LoadedConfig with(const std::vector<std::string>& overrides) {
  return config::load_config_text(kConfig, "now.yaml", overrides);
}

TEST(Resume, ConfigIsTheCheckpointsWithSetOnTop) {
  TempDir dir;
  testing::write_text(dir / "c.ckpt", encoded());
  const Resumption r = resolve_resume((dir / "c.ckpt").string(), std::nullopt, {"train.epochs=7"});
  ASSERT_TRUE(r.checkpoint.has_value());
  EXPECT_EQ(r.config.config.name, "tiny");
  EXPECT_EQ(r.config.config.train.epochs, 7);
  EXPECT_EQ(r.config.sources.at("train.epochs").str(), "--set #1 (train.epochs=7)");
}

TEST(Resume, IncompatibleKeysAreNamedWithBothValues) {
  TempDir dir;
  testing::write_text(dir / "c.ckpt", encoded());
  const std::string path = (dir / "c.ckpt").string();
  const std::string message = error_of([&] {
    resolve_resume(path, std::nullopt, {"model.hidden=[7]", "seed=4", "train.epochs=3"});
  });
  EXPECT_NE(message.find(path + ": cannot resume with another model"), std::string::npos) << message;
  EXPECT_NE(message.find("model.hidden is [4] in the checkpoint but [7] in --set #1"), std::string::npos) << message;
  EXPECT_NE(message.find("seed is 0 in the checkpoint but 4 in --set #2"), std::string::npos) << message;
  EXPECT_EQ(message.find("train.epochs"), std::string::npos) << message;  // allowed to change
  // Mid-epoch (the sample state is 5 micro-batches into an epoch) the batch order is fixed too.
  EXPECT_NE(error_of([&] {
              resolve_resume(path, with({"data.batch_size=64"}), {"data.batch_size=64"});
            }).find("data.batch_size is 128 in the checkpoint but 64 in --set #1"),
            std::string::npos);
  // The --config file (loaded with the same --set) is checked as well.
  EXPECT_NE(error_of([&] {
              resolve_resume(path, with({"model.activation=tanh"}), {});
            }).find("model.activation is relu in the checkpoint but tanh in --set #1"),
            std::string::npos);
  EXPECT_EQ(incompatible_keys(with({}).config, with({"data.batch_size=64"}).config, Position{1, 0, 8}).size(), 0u);
}

// train.resume: auto continues only a restarted job (torchrun's restart count, a requeued Slurm job's).
TEST(Resume, TrainResumeAutoContinuesOnlyARestart) {
  EXPECT_EQ(choose_resume("auto", {}).resume, "");
  EXPECT_NE(choose_resume("auto", {}).reason.find("a first start"), std::string::npos);
  const ResumeChoice elastic = choose_resume("auto", {2, 0});
  EXPECT_EQ(elastic.resume, "auto");
  EXPECT_NE(elastic.reason.find("restart 2 of an elastic job (TORCHELASTIC_RESTART_COUNT=2)"), std::string::npos)
      << elastic.reason;
  const ResumeChoice requeued = choose_resume("auto", {0, 1});
  EXPECT_EQ(requeued.resume, "auto");
  EXPECT_NE(requeued.reason.find("requeued (SLURM_RESTART_COUNT=1)"), std::string::npos) << requeued.reason;
  EXPECT_EQ(choose_resume("never", {3, 3}).resume, "");
  EXPECT_EQ(choose_resume("runs/a/checkpoints/x.ckpt", {}).resume, "runs/a/checkpoints/x.ckpt");
}

TEST(Resume, AutoNeedsTheRunAndStartsFreshWithoutCheckpoints) {
  TempDir dir;
  EXPECT_THROW(resolve_resume("auto", std::nullopt, {}), UserError);
  const config::LoadedConfig file = with({"output.dir=" + dir.path().string()});
  const Resumption r = resolve_resume("auto", file, {});
  EXPECT_FALSE(r.checkpoint.has_value());
  EXPECT_EQ(r.config.config.output.dir, dir.path().string());
}

}  // namespace
}  // namespace gputrain::checkpoint
