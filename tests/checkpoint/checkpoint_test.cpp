// A checkpoint's contents survive the round trip exactly; damaged or foreign
// contents are CheckpointErrors naming the file; the resume config is checked.
#include "gputrain/checkpoint/checkpoint.h"

#include <caffe2/serialize/inline_container.h>
#include <gtest/gtest.h>
#include <torch/nn/modules/activation.h>
#include <torch/nn/modules/batchnorm.h>
#include <torch/nn/modules/container/functional.h>
#include <torch/nn/modules/container/sequential.h>
#include <torch/nn/modules/linear.h>
#include <torch/optim/adamw.h>
#include <torch/optim/sgd.h>
#include <torch/serialize.h>
#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <algorithm>
#include <fstream>
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

// One more identical step from the same weights and optimizer state gives the same weights.
void expect_same_after_a_step(Tiny& trained, Tiny& fresh) {
  torch::manual_seed(5);
  trained.step();
  torch::manual_seed(5);
  fresh.step();
  for (std::size_t i = 0; i < fresh.model->parameters().size(); ++i) {
    EXPECT_TRUE(torch::equal(fresh.model->parameters()[i], trained.model->parameters()[i])) << i;
  }
}

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
  s.batch = ResolvedBatch{48, 4, 12};
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
  EXPECT_EQ(back.batch, (ResolvedBatch{48, 4, 12}));
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
  expect_same_after_a_step(trained, fresh);
  EXPECT_EQ(c.weights().size(), 4u);
  EXPECT_EQ(c.weights().front().first, "fc1.weight");
}

// optim.lookahead's slow weights come back as written; a checkpoint without
// them (every one written before the key, or by a run without it) reads as none.
TEST(Checkpoint, LookaheadSlowWeightsComeBackAndOlderCheckpointsHaveNone) {
  Tiny trained;
  trained.step();
  TrainingState state = sample_state();
  for (const torch::Tensor& p : trained.model->parameters()) state.lookahead.push_back(p.detach() * 3 - 1);
  const Checkpoint c = Checkpoint::parse(encode(state, *trained.model, *trained.optimizer), "c.ckpt");
  ASSERT_EQ(c.state().lookahead.size(), state.lookahead.size());
  for (std::size_t i = 0; i < state.lookahead.size(); ++i) {
    EXPECT_TRUE(torch::equal(c.state().lookahead[i], state.lookahead[i])) << i;
  }
  EXPECT_TRUE(Checkpoint::parse(encoded(), "plain.ckpt").state().lookahead.empty());
}

// The most entries any one archive of the payload holds, its sub-archives
// searched too. LibTorch looks every entry written to or read from an archive
// up among the entries before it, so this many entries cost their square.
std::size_t widest_archive(torch::serialize::InputArchive& archive) {
  const std::vector<std::string> keys = archive.keys();
  std::size_t widest = keys.size();
  for (const std::string& key : keys) {
    c10::IValue value;
    archive.read(key, value);
    if (!value.isObject()) continue;
    torch::serialize::InputArchive child;
    archive.read(key, child);
    widest = std::max(widest, widest_archive(child));
  }
  return widest;
}

std::size_t widest_archive_of(const std::string& sealed) {
  const std::string_view payload = unseal(sealed, "c.ckpt");
  torch::serialize::InputArchive root;
  root.load_from(payload.data(), payload.size());
  return widest_archive(root);
}

// `layers` linear layers of one feature, and an optimizer that has stepped once.
template <typename Optimizer, typename Options>
std::string checkpoint_of_layers(int layers, const Options& options) {
  torch::nn::Sequential model;
  for (int i = 0; i < layers; ++i) model->push_back("fc" + std::to_string(i), torch::nn::Linear(1, 1));
  Optimizer optimizer(model->parameters(), options);
  model->forward(torch::ones({2, 1})).sum().backward();
  optimizer.step();
  return encode(sample_state(), *model, optimizer);
}

// A model of 100,000 layers took minutes to checkpoint, growing with the
// square of its layers: Module::save and Optimizer::save put an entry per
// layer (per parameter) in one archive. The checkpoint's archives stay as
// wide whatever the depth.
TEST(Checkpoint, ArchivesDoNotWidenWithTheNumberOfLayers) {
  for (const auto& [few, many] :
       {std::pair{checkpoint_of_layers<torch::optim::SGD>(2, torch::optim::SGDOptions(0.1).momentum(0.9)),
                  checkpoint_of_layers<torch::optim::SGD>(400, torch::optim::SGDOptions(0.1).momentum(0.9))},
        std::pair{checkpoint_of_layers<torch::optim::AdamW>(2, torch::optim::AdamWOptions(0.1)),
                  checkpoint_of_layers<torch::optim::AdamW>(400, torch::optim::AdamWOptions(0.1))}}) {
    EXPECT_EQ(widest_archive_of(many), widest_archive_of(few));
    EXPECT_LT(widest_archive_of(many), 40u);
  }
}

TEST(Checkpoint, AdamWMomentsAndStepsComeBack) {
  torch::manual_seed(3);
  auto make = [] {
    torch::nn::Sequential model;
    model->push_back("fc1", torch::nn::Linear(3, 4));
    model->push_back("fc2", torch::nn::Linear(4, 2));
    return model;
  };
  torch::nn::Sequential trained = make();
  torch::optim::AdamW adam(trained->parameters(), torch::optim::AdamWOptions(0.01).amsgrad(true));
  auto step = [](torch::nn::Sequential& model, torch::optim::Optimizer& optimizer) {
    torch::manual_seed(7);
    optimizer.zero_grad();
    model->forward(torch::randn({5, 3})).pow(2).sum().backward();
    optimizer.step();
  };
  step(trained, adam);
  step(trained, adam);
  static_cast<torch::optim::AdamWOptions&>(adam.param_groups()[0].options()).lr(0.005);  // as a schedule would
  const Checkpoint c = Checkpoint::parse(encode(sample_state(), *trained, adam), "c.ckpt");
  torch::nn::Sequential fresh = make();
  torch::optim::AdamW restored(fresh->parameters(), torch::optim::AdamWOptions(0.01).amsgrad(true));
  c.load_model(*fresh);
  c.load_optimizer(restored, torch::kCPU);
  EXPECT_EQ(restored.param_groups()[0].options().get_lr(), 0.005);
  step(trained, adam);
  step(fresh, restored);
  for (std::size_t i = 0; i < fresh->parameters().size(); ++i) {
    EXPECT_TRUE(torch::equal(fresh->parameters()[i], trained->parameters()[i])) << i;
  }
  // Another optimizer's state is refused, naming both.
  torch::optim::SGD sgd(fresh->parameters(), torch::optim::SGDOptions(0.1));
  EXPECT_NE(error_of([&] {
              c.load_optimizer(sgd, torch::kCPU);
            }).find("c.ckpt: holds the state of optimizer 'adamw', but the run's is 'sgd'"),
            std::string::npos);
}

// Checkpoints written before the flat lists (format version 1: Module::save's
// and Optimizer::save's trees under "model" and "optimizer") still resume.
TEST(Checkpoint, FormatVersionOneStillReads) {
  Tiny trained;
  trained.step();
  const TrainingState state = sample_state();
  torch::serialize::OutputArchive root;
  torch::serialize::OutputArchive model(root.compilation_unit());
  trained.model->save(model);
  root.write("model", model);
  torch::serialize::OutputArchive optimizer(root.compilation_unit());
  trained.optimizer->save(optimizer);
  root.write("optimizer", optimizer);
  for (const char* count : {"position_epoch", "position_batch", "position_step", "sums_epoch_samples",
                            "sums_interval_samples", "skipped_steps"}) {
    root.write(count, int64_t{1});
  }
  root.write("scaler", c10::Dict<std::string, double>());
  root.write("rng_cpu", state.rng.cpu);
  root.write("rng_cuda", c10::List<at::Tensor>());
  for (const char* text : {"config", "torch_version", "gputrain_version"}) root.write(text, state.config);
  std::string payload;
  root.save_to([&payload](const void* data, std::size_t size) {
    payload.append(static_cast<const char*>(data), size);
    return size;
  });
  const Checkpoint c = Checkpoint::parse(seal(payload), "old.ckpt");
  EXPECT_FALSE(c.state().batch) << "written before checkpoints kept the resolved batch: the config holds it";
  Tiny fresh(4, 2);
  c.load_model(*fresh.model);
  c.load_optimizer(*fresh.optimizer, torch::kCPU);
  expect_same_after_a_step(trained, fresh);
}

// The batch is what a resumed run continues in, so an impossible one is refused, not trained.
TEST(Checkpoint, AnImpossibleBatchIsRefused) {
  TrainingState state = sample_state();
  state.batch = ResolvedBatch{48, 5, 12};
  EXPECT_NE(error_of([&] {
              Checkpoint::parse(encoded(state), "c.ckpt");
            }).find("c.ckpt: its batch (48 per step in 5 micro-batches, 12 per evaluation) is impossible"),
            std::string::npos);
  state.batch.reset();
  EXPECT_FALSE(Checkpoint::parse(encoded(state), "c.ckpt").state().batch);
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

// LibTorch's unpickler reserves whatever length a pickled string declares
// before reading it: four crafted bytes made it take 4 GiB (fuzz.checkpoint).
// The length is refused first, naming the record, and a model.pt is read the
// same way; so is a memo slot LibTorch would grow its table to.
TEST(Checkpoint, ACraftedStringLengthIsRefusedBeforeLibTorchReservesIt) {
  const TrainingState state = sample_state();
  std::string payload(unseal(encoded(state), "c.ckpt"));
  const std::size_t config_at = payload.find(state.config);
  ASSERT_NE(config_at, std::string::npos);
  ASSERT_EQ(payload[config_at - 5], 'X');  // BINUNICODE, then the string's length in four bytes
  payload.replace(config_at - 4, 4, "\xff\xff\xff\xff");
  const std::string expected = "declares a string of 4294967295 bytes where";
  EXPECT_NE(error_of([&] { Checkpoint::parse(seal(payload), "c.ckpt"); }).find("c.ckpt: its data.pkl " + expected),
            std::string::npos);
  TempDir dir;
  std::ofstream(dir / "model.pt", std::ios::binary) << payload;
  EXPECT_NE(error_of([&] { read_weights((dir / "model.pt").string()); }).find("model.pt: its data.pkl " + expected),
            std::string::npos);
  // LONG_BINPUT naming slot 2^24: LibTorch would grow its memo to 16.8 M values.
  payload.replace(config_at - 5, 5, std::string("r\x00\x00\x00\x01", 5));
  EXPECT_NE(error_of([&] {
              Checkpoint::parse(seal(payload), "c.ckpt");
            }).find("c.ckpt: its data.pkl puts a value in memo slot 16777216, more than its"),
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
    const ChosenWeights chosen = read_chosen_weights((dir / file).string(), ExportedWeights::kEvaluated);
    EXPECT_EQ(chosen.tensors.size(), 4u);
    int64_t elements = 0;
    for (const auto& [name, tensor] : chosen.tensors) elements += tensor.numel();
    EXPECT_EQ(elements, 3 * 4 + 4 + 4 * 2 + 2);
  }
  testing::write_text(dir / "junk.pt", "junk");
  EXPECT_NE(error_of([&] {
              Tiny t;
              load_weights(t.model, (dir / "junk.pt").string());
            }).find("junk.pt: is not a weights file gputrain reads"),
            std::string::npos);
}

// The tensors read_chosen_weights chose, by name.
std::map<std::string, torch::Tensor> by_name(const ChosenWeights& chosen) {
  return {chosen.tensors.begin(), chosen.tensors.end()};
}

// `layers` layers cycling through the kinds a model.pt holds: a linear layer,
// one without bias, BatchNorm (buffers), an activation (no weights, and a
// Functional, which Module::save leaves out) and a registered block with a
// Sequential inside, as a residual block is.
torch::nn::Sequential layers_of_every_kind(int layers) {
  torch::nn::Sequential model;
  for (int i = 0; i < layers; ++i) {
    const auto name = [i] { return "l" + std::to_string(i); };
    switch (i % 5) {
      case 0:
        model->push_back(name(), torch::nn::Linear(2, 2));
        break;
      case 1:
        model->push_back(name(), torch::nn::Linear(torch::nn::LinearOptions(2, 2).bias(false)));
        break;
      case 2:
        model->push_back(name(), torch::nn::BatchNorm1d(2));
        break;
      case 3:
        model->push_back(name(), torch::nn::Functional(torch::relu));
        break;
      default: {
        torch::nn::Sequential inner;
        inner->push_back("fc", torch::nn::Linear(2, 2));
        inner->push_back("act", torch::nn::ReLU());
        model->register_module(name(), inner);
      }
    }
  }
  return model;
}

// The TorchScript classes model.pt declares (one file under code/ each).
std::size_t declared_classes(const std::filesystem::path& file) {
  caffe2::serialize::PyTorchStreamReader reader(file.string());
  const std::vector<std::string> records = reader.getAllRecords();
  return std::count_if(records.begin(), records.end(), [](const std::string& record) {
    return record.rfind("code/", 0) == 0 && record.size() > 3 && record.compare(record.size() - 3, 3, ".py") == 0;
  });
}

// Issue 37 #15: LibTorch's Module::save gave each of a model's n layers a class
// of its own and looked each up among the others, so writing model.pt took
// time in n squared (100,000 layers: 310 s). Layers of one layout share a class.
TEST(Weights, ModelPtDeclaresAClassPerLayoutNotPerLayer) {
  TempDir dir;
  save_weights(layers_of_every_kind(10), (dir / "few.pt").string());
  save_weights(layers_of_every_kind(400), (dir / "many.pt").string());
  EXPECT_EQ(declared_classes(dir / "many.pt"), declared_classes(dir / "few.pt"));
  EXPECT_LE(declared_classes(dir / "many.pt"), 7u);  // 5 kinds, the block's Sequential, the model
}

// model.pt stays the file torch::save(module, path) writes: torch::load reads
// every parameter and buffer back, and gputrain's own reader too.
TEST(Weights, TorchLoadReadsModelPtBack) {
  TempDir dir;
  torch::manual_seed(4);
  torch::nn::Sequential trained = layers_of_every_kind(12);
  for (const torch::Tensor& buffer : trained->buffers()) buffer.add_(3);  // not the initial statistics
  save_weights(trained, (dir / "model.pt").string());
  const auto expect_same = [&](const torch::nn::Sequential& read, const char* reader) {
    const auto params = read->named_parameters();
    const auto buffers = read->named_buffers();
    ASSERT_EQ(params.size(), trained->named_parameters().size()) << reader;
    ASSERT_EQ(buffers.size(), trained->named_buffers().size()) << reader;
    for (const auto& p : trained->named_parameters()) EXPECT_TRUE(torch::equal(params[p.key()], p.value())) << p.key();
    for (const auto& b : trained->named_buffers()) EXPECT_TRUE(torch::equal(buffers[b.key()], b.value())) << b.key();
  };
  torch::manual_seed(5);
  torch::nn::Sequential by_libtorch = layers_of_every_kind(12);
  torch::load(by_libtorch, (dir / "model.pt").string());
  expect_same(by_libtorch, "torch::load");
  torch::manual_seed(6);
  torch::nn::Sequential by_gputrain = layers_of_every_kind(12);
  load_weights(by_gputrain, (dir / "model.pt").string());
  expect_same(by_gputrain, "load_weights");
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
  const ChosenWeights average = read_chosen_weights((dir / "ema.ckpt").string(), ExportedWeights::kEvaluated);
  EXPECT_NE(average.weights.find("train.ema"), std::string::npos) << average.weights;
  const auto written = by_name(average);
  ASSERT_EQ(written.size(), model->named_parameters().size() + model->named_buffers().size());
  for (const auto& p : evaluated->named_parameters())
    EXPECT_TRUE(torch::equal(written.at(p.key()), p.value())) << p.key();
  for (const auto& b : evaluated->named_buffers()) EXPECT_TRUE(torch::equal(written.at(b.key()), b.value())) << b.key();

  const ChosenWeights live = read_chosen_weights((dir / "ema.ckpt").string(), ExportedWeights::kLive);
  EXPECT_NE(live.weights.find("live"), std::string::npos) << live.weights;
  const auto raw = by_name(live);
  for (const auto& p : model->named_parameters()) EXPECT_TRUE(torch::equal(raw.at(p.key()), p.value())) << p.key();

  testing::write_text(dir / "plain.ckpt", encoded());
  EXPECT_NE(error_of([&] {
              read_chosen_weights((dir / "plain.ckpt").string(), ExportedWeights::kAverage);
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
  EXPECT_EQ(choose_resume(config::ResumeFrom{}, {}).resume, "");
  EXPECT_NE(choose_resume(config::ResumeFrom{}, {}).reason.find("a first start"), std::string::npos);
  const ResumeChoice elastic = choose_resume(config::ResumeFrom{}, {2, 0});
  EXPECT_EQ(elastic.resume, "auto");
  EXPECT_NE(elastic.reason.find("restart 2 of an elastic job (TORCHELASTIC_RESTART_COUNT=2)"), std::string::npos)
      << elastic.reason;
  const ResumeChoice requeued = choose_resume(config::ResumeFrom{}, {0, 1});
  EXPECT_EQ(requeued.resume, "auto");
  EXPECT_NE(requeued.reason.find("requeued (SLURM_RESTART_COUNT=1)"), std::string::npos) << requeued.reason;
  EXPECT_EQ(choose_resume({config::ResumeFrom::Kind::kNever, ""}, {3, 3}).resume, "");
  EXPECT_EQ(choose_resume({config::ResumeFrom::Kind::kCheckpoint, "runs/a/checkpoints/x.ckpt"}, {}).resume,
            "runs/a/checkpoints/x.ckpt");
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
