#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>

#include <filesystem>
#include <thread>

#include "gputrain/config/load.h"
#include "support/temp_dir.h"

namespace gputrain::config {
namespace {

// Loads YAML text and returns the ConfigError it raises (fails the test if none).
ConfigError config_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    load_config_text(yaml, "exp.yaml", overrides);
  } catch (const ConfigError& e) {
    return e;
  }
  ADD_FAILURE() << "no ConfigError for:\n" << yaml;
  return ConfigError({}, "", "");
}

// Checks that exp.yaml's `yaml` is refused at `key` on line `line`, saying `text`; returns the error.
ConfigError expect_refused(const std::string& yaml, const std::string& key, const std::string& text, int64_t line) {
  const ConfigError e = config_error(yaml);
  EXPECT_EQ(e.key(), key) << yaml;
  EXPECT_NE(std::string(e.what()).find(text), std::string::npos) << yaml << " -> " << e.what();
  EXPECT_EQ(e.where().origin, "exp.yaml") << yaml;
  EXPECT_EQ(e.where().line, line) << yaml;
  return e;
}

TEST(ConfigLoad, ContractExampleParses) {
  const auto loaded = load_config_text(R"(
name: cifar10-seed
seed: 0
device: auto
gpus: all
strategy: auto
data:
  dataset: cifar10
  root: datasets/cifar-10-batches-bin
  batch_size: 128
  num_workers: 4
  pin_memory: true
  shuffle: true
  drop_last: false
  normalize: {mean: [0.5, 0.5, 0.5], std: [0.5, 0.5, 0.5]}
model:
  name: cifar10_cnn
optim:
  name: sgd
  lr: 0.01
  momentum: 0.9
  weight_decay: 0.0
train:
  epochs: 10
  amp: off
  accumulation_steps: 1
  grad_clip: 0.0
  log_every: 50
checkpoint:
  dir: checkpoints
  every: 1
  keep: 3
output:
  dir: runs
)",
                                       "exp.yaml");
  const ExperimentConfig& c = loaded.config;
  EXPECT_EQ(c.name, "cifar10-seed");
  EXPECT_TRUE(c.gpus.all);
  EXPECT_EQ(c.data.dataset, DatasetName::kCifar10);
  EXPECT_EQ(c.data.batch_size, 128);
  EXPECT_EQ(c.data.normalize.mean, (std::vector<double>{0.5, 0.5, 0.5}));
  EXPECT_EQ(c.optim.momentum, 0.9);
  EXPECT_EQ(c.train.amp, AmpMode::kOff);  // YAML 1.1 would call this a boolean; the key wants a word
  EXPECT_EQ(c.checkpoint.keep, 3);
  EXPECT_EQ(loaded.sources.at("data.batch_size").str(), "exp.yaml:10:15");
}

// `device:` is parsed once, when the file is read: the run gets its kind and index.
TEST(ConfigLoad, DeviceIsParsedWhenTheFileIsRead) {
  EXPECT_EQ(load_config_text("device: auto\n", "d.yaml").config.device.kind, DeviceKind::kAuto);
  EXPECT_EQ(load_config_text("device: cpu\n", "d.yaml").config.device.kind, DeviceKind::kCpu);
  EXPECT_EQ(load_config_text("device: mps\n", "d.yaml").config.device.kind, DeviceKind::kMps);
  const DeviceRequest cuda = load_config_text("device: cuda\n", "d.yaml").config.device;
  EXPECT_EQ(cuda.kind, DeviceKind::kCuda);
  EXPECT_FALSE(cuda.index.has_value());
  const DeviceRequest third = load_config_text("name: x\ndevice: cuda:3\n", "d.yaml").config.device;
  EXPECT_EQ(third.kind, DeviceKind::kCuda);
  EXPECT_EQ(third.index, 3);
  EXPECT_EQ(third.text(), "cuda:3");
  for (const char* bad : {"cuda:", "cuda:x", "cuda:-1", "tpu"}) {
    try {
      load_config_text(fmt::format("name: x\ndevice: '{}'\n", bad), "d.yaml");
      ADD_FAILURE() << bad << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), "device");
      EXPECT_NE(std::string(e.what()).find(fmt::format("d.yaml:2:9: device: unknown device '{}'", bad)),
                std::string::npos)
          << e.what();
    }
  }
}

TEST(ConfigLoad, EmptyFileGivesDefaultsWithResolvedRoot) {
  const auto c = load_config_text("", "empty.yaml").config;
  EXPECT_EQ(c.data.dataset, DatasetName::kCifar10);
  EXPECT_EQ(c.data.root, "datasets/cifar-10-batches-bin");
  EXPECT_EQ(load_config_text("data: {dataset: fashion_mnist}", "x").config.data.root,
            "/usr/share/datasets/fashion-mnist");
}

TEST(ConfigLoad, UnknownKeyNamesLineColumnAndClosestKey) {
  const ConfigError e = config_error("data:\n  batch_sise: 4\n");
  EXPECT_EQ(e.key(), "data.batch_sise");
  EXPECT_EQ(e.where().line, 2);
  EXPECT_EQ(e.where().column, 3);
  EXPECT_NE(std::string(e.what()).find("did you mean 'batch_size'?"), std::string::npos) << e.what();
  EXPECT_NE(std::string(e.what()).find("exp.yaml:2:3"), std::string::npos) << e.what();
  const ConfigError train = config_error("train:\n  tensorbord: false\n");
  EXPECT_EQ(train.key(), "train.tensorbord");
  EXPECT_NE(std::string(train.what()).find("did you mean 'tensorboard'?"), std::string::npos) << train.what();
}

TEST(ConfigLoad, UnknownTopLevelKeyWithoutNearMatchListsValidKeys) {
  const ConfigError e = config_error("name: x\nhyperparameters: {}\n");
  EXPECT_EQ(e.key(), "hyperparameters");
  EXPECT_NE(std::string(e.what()).find("valid keys here"), std::string::npos) << e.what();
}

TEST(ConfigLoad, DuplicateKeyIsRejected) {
  const ConfigError e = config_error("seed: 1\nseed: 2\n");
  EXPECT_NE(std::string(e.what()).find("duplicate key"), std::string::npos) << e.what();
}

TEST(ConfigLoad, OutOfRangeValuesNameKeyValueAndRule) {
  struct Case {
    std::string yaml, key, text;
  };
  const std::vector<Case> cases{
      {"data: {batch_size: 0}", "data.batch_size", "must be >= 1 (got 0)"},
      {"optim: {lr: -0.1}", "optim.lr", "must be > 0 (got -0.1)"},
      {"optim: {lr: .nan}", "optim.lr", "must be a finite number (got .nan)"},
      {"optim: {lr: 1.0e+300}", "optim.lr", "1.0e+300 is beyond float32's range"},
      {"train: {accumulation_steps: 0}", "train.accumulation_steps", "must be >= 1 (got 0)"},
      {"data: {num_workers: -1}", "data.num_workers", "must be >= 0 (got -1)"},
      {"model: {dropout: 1.0}", "model.dropout", "must be in [0, 1) (got 1)"},
      {"optim: {betas: [0.9]}", "optim.betas", "needs two values"},
      {"data: {normalize: {mean: [0.5], std: [0.0]}}", "data.normalize.std", "every value must be > 0"},
      {"data: {normalize: {mean: [0.5, 0.5], std: [0.5]}}", "data.normalize.std", "as many values as mean"},
      {"gpus: [0, 0]", "gpus", "listed twice"},
      {"gpus: [-1]", "gpus", "GPU indices are >= 0"},
      {"name: ../escape", "name", "must start with a letter or digit"},
      {"device: gpu", "device", "unknown device 'gpu'"},
      {"optim: {nesterov: true}", "optim.nesterov", "needs optim.momentum > 0"},
      {"data: {augment: {reflect: true}}", "data.augment.reflect", "set it too"},
      {"data: {augment: {alternating_flip: true}}", "data.augment.alternating_flip", "set data.augment.hflip"},
      {"data: {augment: {random_resized_crop: {size: 8, scale: [0.9, 0.1]}}}", "data.augment.random_resized_crop.scale",
       "must be [low, high] with low <= high"},
      {"data: {augment: {random_resized_crop: {ratio: [0, 1]}}}", "data.augment.random_resized_crop.ratio",
       "must be > 0 (got 0)"},
      {"data: {augment: {color_jitter: {hue: 0.6}}}", "data.augment.color_jitter.hue", "must be in [0, 0.5] (got 0.6)"},
      {"data: {augment: {color_jitter: {contrast: -1}}}", "data.augment.color_jitter.contrast",
       "must be >= 0 (got -1)"},
      {"data: {center_crop: [1, 2, 3]}", "data.center_crop", "must be one size (a square) or [height, width]"},
      {"data: {image_size: 32, resize: 36}", "data.image_size",
       "would not be used: `resize` and `center_crop` replace it"},
      {"train: {target_accuracy: 93}", "train.target_accuracy", "must be in [0, 1] (got 93)"},
      {"train: {ema: {decay: 1}}", "train.ema.decay", "must be in [0, 1) (got 1)"},
      {"train: {monitor_ms: 5}", "train.monitor_ms", "must be 0 (off) or >= 10 (got 5)"},
      {"optim: {foreach: true, fused: true}", "optim.fused", "set at most one"},
      {"optim: {name: adamw, muon: {lr: 0.2, momentum: 0}}", "optim.muon.nesterov", "needs optim.muon.momentum > 0"},
      {"optim: {muon: {lr: 0.2, momentum: 0}}", "optim.muon.nesterov", "needs optim.muon.momentum > 0"},
      {"optim: {muon: {steps: 0}}", "optim.muon.steps", "must be in [1, 100] (got 0)"},
      {"optim: {muon: {steps: 1000000}}", "optim.muon.steps", "must be in [1, 100] (got 1000000)"},
      {"optim: {lookahead: {k: -1}}", "optim.lookahead.k", "must be >= 0 (got -1)"},
      {"optim: {lookahead: {k: 5, alpha: 0}}", "optim.lookahead.alpha", "must be in (0, 1] (got 0)"},
      {"optim: {lookahead: {k: 5, alpha: 1.5}}", "optim.lookahead.alpha", "must be in (0, 1] (got 1.5)"},
      {"optim: {bias_lr_multiplier: 0}", "optim.bias_lr_multiplier", "must be > 0 (got 0)"},
      {"optim: {scheduler: linear_warmup_decay, warmup_fraction: 1.5}", "optim.warmup_fraction",
       "must be in [0, 1] (got 1.5)"},
      {"optim: {scheduler: linear_warmup_decay, cooldown_fraction: -0.1}", "optim.cooldown_fraction",
       "must be in [0, 1] (got -0.1)"},
      {"optim: {scheduler: linear_warmup_decay, warmup_fraction: 0.6, cooldown_fraction: 0.5}",
       "optim.cooldown_fraction", "optim.warmup_fraction + optim.cooldown_fraction must be <= 1 (got 0.6 + 0.5)"},
      {"optim: {scheduler: cosine, warmup_fraction: 0.2}", "optim.warmup_fraction",
       "only applies to optim.scheduler: linear_warmup_decay (the scheduler is cosine)"},
      {"optim: {cooldown_fraction: 0.2}", "optim.cooldown_fraction",
       "only applies to optim.scheduler: linear_warmup_decay (the scheduler is none)"},
      {"optim: {scheduler: linear_warmup_decay, warmup_steps: 10}", "optim.warmup_steps",
       "linear_warmup_decay warms up by itself over optim.warmup_fraction; set that instead of warmup_steps"},
      {"train: {threads: -1}", "train.threads", "must be >= 0 (got -1)"},
      {"checkpoint: {dir: /tmp/elsewhere}", "checkpoint.dir", "a relative path without '..'"},
      {"checkpoint: {dir: ../../out}", "checkpoint.dir", "a relative path without '..'"},
      {"checkpoint: {dir: a/../../b}", "checkpoint.dir", "a relative path without '..'"},
      {"checkpoint: {dir: .}", "checkpoint.dir", "a relative path without '..'"},
  };
  for (const auto& c : cases) expect_refused(c.yaml, c.key, c.text, 1);
}

// Issue 39: Muon runs beside Adam and AdamW as beside SGD (optim/muon.h).
TEST(ConfigLoad, MuonLoadsWithAdamAndAdamW) {
  for (const std::string name : {"adam", "adamw"}) {
    const OptimConfig c =
        load_config_text("optim: {name: " + name + ", betas: [0.8, 0.95], muon: {lr: 0.2}}\n", "x").config.optim;
    EXPECT_EQ(c.muon.lr, 0.2) << name;
    EXPECT_EQ(c.betas, (std::vector<double>{0.8, 0.95})) << name;
  }
}

// Issue 21: parameter groups and the trapezoid schedule, each off by default.
TEST(ConfigLoad, OptimGroupAndTrapezoidKeysParse) {
  const OptimConfig defaults = load_config_text("", "x").config.optim;
  EXPECT_FALSE(defaults.no_decay_bias_norm);
  EXPECT_EQ(defaults.bias_lr_multiplier, 1.0);
  EXPECT_EQ(defaults.warmup_fraction, 0.0);
  EXPECT_EQ(defaults.cooldown_fraction, 0.0);
  const OptimConfig set = load_config_text(
                              "optim: {no_decay_bias_norm: true, bias_lr_multiplier: 64, scheduler: "
                              "linear_warmup_decay, warmup_fraction: 0.7, cooldown_fraction: 0.3}\n",
                              "x")
                              .config.optim;
  EXPECT_TRUE(set.no_decay_bias_norm);
  EXPECT_EQ(set.bias_lr_multiplier, 64.0);
  EXPECT_EQ(set.scheduler, SchedulerName::kLinearWarmupDecay);
  EXPECT_EQ(set.warmup_fraction, 0.7);
  EXPECT_EQ(set.cooldown_fraction, 0.3);
  // A triangle: the fractions sum to 1.
  EXPECT_NO_THROW(
      load_config_text("optim: {scheduler: linear_warmup_decay, warmup_fraction: 0.1, "
                       "cooldown_fraction: 0.9}\n",
                       "x"));
  const ConfigError e = config_error("optim:\n  scheduler: linear_warmup_decay\n  warmup_fraction: 0.8\n",
                                     {"optim.cooldown_fraction=0.4"});
  EXPECT_EQ(e.key(), "optim.cooldown_fraction");
  EXPECT_NE(std::string(e.what()).find("--set #1"), std::string::npos) << e.what();
}

TEST(ConfigLoad, UnknownEnumWordListsAllowedAndSuggests) {
  const ConfigError e = config_error("train:\n  amp: fp61\n");
  EXPECT_STREQ(e.what(),
               "exp.yaml:2:8: train.amp: unknown value 'fp61'; allowed: off, fp16 or bf16 (did you mean 'fp16'?)");
  EXPECT_STREQ(config_error("model: {name: mpl}").what(),
               "exp.yaml:1:15: model.name: unknown value 'mpl'; allowed: linear, mlp, cifar10_cnn or layers (did you "
               "mean 'mlp'?)");
}

TEST(ConfigLoad, WrongTypesSayWhatWasExpected) {
  EXPECT_NE(std::string(config_error("data: {batch_size: many}").what()).find("cannot read 'many' as an integer"),
            std::string::npos);
  EXPECT_NE(std::string(config_error("data: {batch_size: 3.5}").what()).find("as an integer"), std::string::npos);
  EXPECT_NE(std::string(config_error("data: {shuffle: maybe}").what()).find("true or false"), std::string::npos);
  EXPECT_NE(std::string(config_error("data: {batch_size: [1, 2]}").what()).find("got a list"), std::string::npos);
  EXPECT_NE(std::string(config_error("data: 5").what()).find("expected a mapping"), std::string::npos);
  EXPECT_NE(std::string(config_error("model: {hidden: [64, x]}").what()).find("item 1 ('x') is not an integer"),
            std::string::npos);
}

TEST(ConfigLoad, Fp16OnCpuSuggestsBf16) {
  const ConfigError e = config_error("device: cpu\ntrain: {amp: fp16}\n");
  EXPECT_NE(std::string(e.what()).find("use bf16"), std::string::npos) << e.what();
}

TEST(ConfigLoad, FastPathSwitchesAreAutoByDefaultAndReadAsGiven) {
  const ExperimentConfig defaults = load_config_text("", "x").config;
  for (const Switch s : {defaults.data.device_cache, defaults.optim.fused, defaults.train.cuda_graph,
                         defaults.train.channels_last, defaults.train.cudnn_benchmark}) {
    EXPECT_EQ(s, Switch::kAuto);
  }
  EXPECT_FALSE(defaults.train.threads.has_value());
  EXPECT_EQ(defaults.train.matmul_precision, MatmulPrecision::kAuto);
  EXPECT_FALSE(defaults.optim.foreach);
  const ExperimentConfig on = load_config_text(
                                  "data: {device_cache: true}\noptim: {fused: true}\n"
                                  "train: {cuda_graph: on, channels_last: true, cudnn_benchmark: true, threads: 3}\n",
                                  "x", {"optim.fused=off", "optim.foreach=true"})
                                  .config;
  EXPECT_EQ(on.data.device_cache, Switch::kOn);
  EXPECT_EQ(on.optim.fused, Switch::kOff);
  EXPECT_TRUE(on.optim.foreach);
  for (const Switch s : {on.train.cuda_graph, on.train.channels_last, on.train.cudnn_benchmark}) {
    EXPECT_EQ(s, Switch::kOn);
  }
  EXPECT_EQ(on.train.threads, 3);
  EXPECT_EQ(load_config_text("data: {device_cache: auto}\n", "x").config.data.device_cache, Switch::kAuto);
  EXPECT_EQ(load_config_text("train: {matmul_precision: high}\n", "x").config.train.matmul_precision,
            MatmulPrecision::kHigh);
  EXPECT_THROW(load_config_text("data: {device_cache: maybe}\n", "x"), ConfigError);
  EXPECT_THROW(load_config_text("train: {matmul_precision: low}\n", "x"), ConfigError);
}

TEST(ConfigLoad, GpusTakesAllAListOrOneIndex) {
  EXPECT_TRUE(load_config_text("gpus: all", "x").config.gpus.all);
  const auto listed = load_config_text("gpus: [1, 0]", "x").config.gpus;
  EXPECT_FALSE(listed.all);
  EXPECT_EQ(listed.indices, (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(load_config_text("gpus: 2", "x").config.gpus.indices, (std::vector<int64_t>{2}));
}

TEST(ConfigLoad, ImageSizeTakesOneSizeOrHeightAndWidth) {
  EXPECT_EQ(load_config_text("data: {image_size: 28}", "x").config.data.image_size, (std::vector<int64_t>{28}));
  EXPECT_EQ(load_config_text("data: {image_size: [24, 32]}", "x").config.data.image_size,
            (std::vector<int64_t>{24, 32}));
  EXPECT_TRUE(load_config_text("", "x").config.data.image_size.empty());
  for (const char* bad : {"data: {image_size: [24, 32, 3]}", "data: {image_size: [0, 32]}"}) {
    const ConfigError error = config_error(bad);
    EXPECT_EQ(error.key(), "data.image_size") << bad;
    EXPECT_NE(std::string(error.what()).find("must be one size (a square) or [height, width], each >= 1"),
              std::string::npos)
        << error.what();
  }
}

// torchvision's RandomResizedCrop takes a share of the area in (0, 1] and
// ordered positive ratio bounds; anything else is refused at its key.
TEST(ConfigLoad, RandomResizedCropBoundsAreRefusedAtTheirLine) {
  for (const auto& [key, text] : std::vector<std::pair<std::string, std::string>>{
           {"scale: [0.5, 1.5]", "every value must be in (0, 1] (got 1.5)"},
           {"scale: [0, 1]", "every value must be in (0, 1] (got 0)"},
           {"ratio: [2, 1]", "must be [low, high] with low <= high"},
           {"ratio: [-1, 1]", "every value must be > 0 (got -1)"}}) {
    const std::string yaml = "name: x\ndata:\n  augment:\n    random_resized_crop:\n      " + key;
    const ConfigError e =
        expect_refused(yaml, "data.augment.random_resized_crop." + key.substr(0, key.find(':')), text, 5);
    EXPECT_EQ(e.where().column, 14) << yaml;  // the value's
  }
}

// Every size an image is brought to has a range, so that no value overflows
// a tensor's size (image_size: 2147483648 did) or asks more of each image than
// data.max_image_pixels allows its files.
TEST(ConfigLoad, ImageSizeKeysAreRangedAtTheirLine) {
  struct Case {
    std::string lines, key, text;
  };
  const std::vector<Case> cases{
      {"  image_size: 2147483648", "data.image_size", "every value must be in [0, 65535] (got 2147483648)"},
      {"  image_size: [65535, 65535]", "data.image_size",
       "asks 4294836225 pixels of every image, more than data.max_image_pixels (89478485)"},
      {"  resize: 100000", "data.resize", "must be in [0, 65535] (got 100000)"},
      {"  resize: 20000", "data.resize", "asks 400000000 pixels of every image"},
      {"  center_crop: [70000]", "data.center_crop", "every value must be in [1, 65535] (got 70000)"},
      {"  augment:\n    random_crop: 1000000", "data.augment.random_crop", "must be in [0, 65535] (got 1000000)"},
      {"  augment:\n    random_resized_crop:\n      size: 70000", "data.augment.random_resized_crop.size",
       "must be in [0, 65535] (got 70000)"},
      {"  augment:\n    random_resized_crop:\n      size: 20000", "data.augment.random_resized_crop.size",
       "asks 400000000 pixels of every image"},
  };
  for (const Case& c : cases) {
    expect_refused("name: x\ndata:\n" + c.lines, c.key, c.text, 3 + std::count(c.lines.begin(), c.lines.end(), '\n'));
  }
  // A bound raised on purpose lets such sizes through.
  EXPECT_NO_THROW(load_config_text("data: {resize: 20000, max_image_pixels: 400000000}", "x"));
}

TEST(ConfigOverrides, DottedKeysOverrideTheFileInOrder) {
  const auto c = load_config_text("data: {batch_size: 64}\n", "x",
                                  {"data.batch_size=32", "optim.lr=0.5", "gpus=[0,1]", "data.batch_size=16",
                                   "model.hidden=[128, 64]", "train.amp=bf16"})
                     .config;
  EXPECT_EQ(c.data.batch_size, 16);
  EXPECT_DOUBLE_EQ(c.optim.lr, 0.5);
  EXPECT_EQ(c.gpus.indices, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(c.model.hidden, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(c.train.amp, AmpMode::kBf16);
}

TEST(ConfigOverrides, ErrorsCiteTheSetArgument) {
  const ConfigError bad_value = config_error("", {"train.epochs=3", "data.batch_size=0"});
  EXPECT_EQ(bad_value.where().origin, "--set #2 (data.batch_size=0)");
  EXPECT_EQ(bad_value.key(), "data.batch_size");

  const ConfigError unknown = config_error("", {"data.batchsize=4"});
  EXPECT_EQ(unknown.where().origin, "--set #1 (data.batchsize=4)");
  EXPECT_NE(std::string(unknown.what()).find("did you mean 'batch_size'?"), std::string::npos);

  const ConfigError not_section = config_error("seed: 1", {"seed.value=2"});
  EXPECT_NE(std::string(not_section.what()).find("'seed' is not a section"), std::string::npos);

  EXPECT_THROW(load_config_text("", "x", {"no_equals_sign"}), UserError);
  EXPECT_THROW(load_config_text("", "x", {"=3"}), UserError);
  EXPECT_THROW(load_config_text("", "x", {"data..batch_size=3"}), ConfigError);
}

TEST(ConfigLoad, MalformedYamlIsOneCleanParagraph) {
  try {
    load_config_text("data:\n  batch_size: [1, 2\n", "bad.yaml");
    FAIL() << "no error";
  } catch (const UserError& e) {
    const std::string what = e.what();
    EXPECT_EQ(what.rfind("bad.yaml:", 0), 0u) << what;
    EXPECT_NE(what.find("malformed YAML"), std::string::npos) << what;
    EXPECT_EQ(what.find('\n'), std::string::npos) << what;
  }
  EXPECT_THROW(load_config_text("- a\n- b\n", "list.yaml"), UserError);
}

TEST(ConfigLoad, MissingFileIsAUserError) {
  try {
    load_config("/nonexistent/exp.yaml");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/exp.yaml: cannot open"), std::string::npos) << e.what();
    EXPECT_EQ(e.code(), ExitCode::kUserInput);
  }
}

TEST(ConfigLoad, ReadsFromDisk) {
  testing::TempDir dir;
  const auto path = testing::write_text(dir / "exp.yaml", "name: disk\ntrain: {epochs: 2}\n");
  const auto loaded = load_config(path.string(), {"train.epochs=3"});
  EXPECT_EQ(loaded.config.name, "disk");
  EXPECT_EQ(loaded.config.train.epochs, 3);
  EXPECT_EQ(loaded.sources.at("name").str(), path.string() + ":1:7");
  EXPECT_EQ(loaded.sources.at("train.epochs").str(), "--set #1 (train.epochs=3)");
}

// The message of the UserError that loading `yaml` raises.
std::string user_error(const std::string& yaml, const std::vector<std::string>& overrides = {}) {
  try {
    load_config_text(yaml, "exp.yaml", overrides);
  } catch (const UserError& e) {
    EXPECT_EQ(e.code(), ExitCode::kUserInput);
    return e.what();
  }
  ADD_FAILURE() << "no UserError for:\n" << yaml.substr(0, 200);
  return "";
}

std::string repeat(const std::string& text, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += text;
  return out;
}

TEST(ConfigLimits, FileOverSixteenMebibytesIsRefusedUnread) {
  testing::TempDir dir;
  const auto path = testing::write_text(dir / "huge.yaml", "name: x\n" + repeat("# padding\n", 1700000));
  for (const std::string& file : {path.string(), std::string("/dev/zero")}) {
    try {
      load_config(file);
      ADD_FAILURE() << "no error for " << file;
    } catch (const UserError& e) {
      EXPECT_EQ(std::string(e.what()).rfind(file + ": larger than 16 MiB", 0), 0u) << e.what();
    }
  }
}

// A run writes its resolved config as config.yaml; with a long model.layers
// that is over 1 MiB (1.9 MB for 100,000 layers), and it must read back.
TEST(ConfigLimits, TheConfigARunOfALongModelWritesReadsBack) {
  testing::TempDir dir;
  std::string yaml =
      "name: long\ndata: {dataset: synthetic, features: 4, classes: 2}\nmodel:\n  name: layers\n"
      "  layers:\n";
  for (int i = 0; i < 12000; ++i) {
    yaml +=
        fmt::format("    - {{type: linear, out_features: 4, name: a_layer_with_a_long_descriptive_name_{:06}}}\n", i);
  }
  yaml += "    - linear\n";
  const std::string written = dump_config(load_config_text(yaml, "long.yaml").config);
  ASSERT_GT(written.size(), std::size_t{1} << 20);
  const auto path = testing::write_text(dir / "config.yaml", written);
  EXPECT_EQ(load_config(path.string()).config.model.layers.size(), 12001u);
}

TEST(ConfigLimits, DeepNestingIsAClearErrorNotACrash) {
  std::string block_map;
  for (int depth = 0; depth < 1200; ++depth) block_map += std::string(depth, ' ') + "a:\n";
  for (const std::string& yaml : {repeat("[", 200000), repeat("{a: ", 100000), repeat("- ", 100000) + "x\n", block_map,
                                  "data:\n  normalize:\n    mean: " + repeat("[", 5000) + repeat("]", 5000) + "\n"}) {
    const std::string error = user_error(yaml);
    EXPECT_EQ(error.rfind("exp.yaml:", 0), 0u) << error;
    EXPECT_NE(error.find("nested too deeply"), std::string::npos) << error;
  }
  EXPECT_NE(user_error("", {"data.normalize.mean=" + repeat("[", 100000)}).find("nested too deeply"),
            std::string::npos);
}

// YAML aliases (*name) repeat what an anchor (&name) holds without copying it
// in the text: refused when they make a node endless or the document larger
// than an experiment file, before any node is built (issue 37).
// "Billion laughs": `levels` anchors, each a list of ten aliases to the one before.
std::string laughs(int levels, const std::string& under) {
  std::string yaml = "a0: &a0 [lol]\n";
  for (int level = 1; level <= levels; ++level) {
    yaml += "a" + std::to_string(level) + ": &a" + std::to_string(level) + " [";
    for (int i = 0; i < 10; ++i) yaml += (i ? ", *a" : "*a") + std::to_string(level - 1);
    yaml += "]\n";
  }
  return under + ":\n" + [&] {
    std::string indented;
    for (std::size_t at = 0; at < yaml.size();) {
      const std::size_t end = yaml.find('\n', at);
      indented += "  " + yaml.substr(at, end + 1 - at);
      at = end + 1;
    }
    return indented;
  }();
}

TEST(ConfigAliases, AnAliasInsideTheNodeItNamesIsRefusedNotACrash) {
  EXPECT_EQ(user_error("model:\n  layers: &L [{type: residual, layers: *L}, flatten, linear]\n"),
            "exp.yaml:2:40: the alias *L is inside the node it names (&L at line 2), which would make it endless; an "
            "alias can only repeat a node that ends before it");
  EXPECT_NE(user_error("data: &d {normalize: *d}\n").find("exp.yaml:1:22: the alias *d is inside"), std::string::npos);
  EXPECT_NE(user_error("", {"model.layers=&L [{type: residual, layers: *L}]"}).find("the alias *L is inside"),
            std::string::npos);
}

TEST(ConfigAliases, AliasesThatExpandPastTheLimitAreRefusedAtOnce) {
  // Six levels stand for a million values, nine for a billion; an unknown key does not read them first.
  for (const auto& yaml : {laughs(6, "model"), laughs(9, "model"), laughs(9, "no_such_key")}) {
    const std::string error = user_error(yaml);
    EXPECT_EQ(error.rfind("exp.yaml:", 0), 0u) << error;
    EXPECT_NE(error.find("with the alias *a"), std::string::npos) << error;
    EXPECT_NE(error.find("more than 100000 values once its aliases (*name) are expanded"), std::string::npos) << error;
  }
  // An alias nesting a deep list in itself, again and again: deeper than any reader should recurse.
  std::string deep = "a0: &a0 " + std::string(40, '[') + std::string(40, ']') + "\n";
  for (int level = 1; level <= 4; ++level) {
    deep += "a" + std::to_string(level) + ": &a" + std::to_string(level) + " " + std::string(40, '[') + "*a" +
            std::to_string(level - 1) + std::string(40, ']') + "\n";
  }
  const std::string error = user_error(deep);
  EXPECT_NE(error.find("with the alias *a1, the document is nested too deeply"), std::string::npos) << error;
}

// The limit is on what aliases add: a long file written out in full (a run's
// config.yaml of a model of 25 000 declared layers: 125 000 values) reads back.
TEST(ConfigAliases, ALongDocumentWithoutAliasesIsNotHeldToTheLimit) {
  std::string yaml = "data: {dataset: synthetic, features: 4, classes: 2}\nmodel:\n  layers:\n";
  for (int i = 0; i < 25000; ++i) yaml += "    - {type: linear, out_features: 4}\n";
  yaml += "    - linear\n";
  EXPECT_EQ(load_config_text(yaml, "exp.yaml").config.model.layers.size(), 25001u);
}

TEST(ConfigAliases, AliasesWithinTheLimitsStillRead) {
  const auto loaded = load_config_text(
      "model:\n  layers: [&block {type: linear, out_features: 8}, relu, *block, relu, linear]\n"
      "data: {dataset: synthetic, normalize: {mean: &m [0.5], std: *m}}\n",
      "exp.yaml");
  ASSERT_EQ(loaded.config.model.layers.size(), 5u);
  EXPECT_EQ(loaded.config.model.layers[2].values.at("out_features"), 8);
  EXPECT_EQ(loaded.config.data.normalize.std, std::vector<double>{0.5});
}

TEST(ConfigLoad, DirectoryIsNotAnExperimentFile) {
  testing::TempDir dir;
  try {
    load_config(dir.path().string());
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_EQ(std::string(e.what()), dir.path().string() + ": is a directory; --config takes an experiment file");
  }
}

TEST(ConfigLoad, NumbersMustBeFinite) {
  // Each would be written to config.yaml as inf or nan, which no YAML reader takes back.
  const ConfigError lr = config_error("optim: {lr: .inf}\n");
  EXPECT_EQ(lr.key(), "optim.lr");
  EXPECT_NE(std::string(lr.what()).find("must be a finite number (got .inf)"), std::string::npos) << lr.what();
  EXPECT_EQ(config_error("train: {grad_clip: .inf}\n").key(), "train.grad_clip");
  EXPECT_EQ(config_error("data: {normalize: {mean: [0.5, .nan], std: [1, 1]}}\n").key(), "data.normalize.mean");
  EXPECT_EQ(config_error("", {"optim.eps=-.inf"}).key(), "optim.eps");
}

TEST(ConfigLoad, TextMustBeUtf8AndErrorsShowTheBytesEscaped) {
  // YAML holds UTF-8 only: such a path would not survive the trip through config.yaml.
  const ConfigError root = config_error("data: {root: /data/caf\xe9}\n");
  EXPECT_EQ(root.key(), "data.root");
  EXPECT_NE(std::string(root.what())
                .find("exp.yaml:1:14: data.root: '/data/caf\\xe9' is not valid UTF-8 (byte 0xe9 at offset 9); "
                      "YAML holds only UTF-8 text, so rename the path or reach it through a symbolic link"),
            std::string::npos)
      << root.what();
  const ConfigError set = config_error("", {"output.dir=runs\xff"});
  EXPECT_EQ(set.key(), "output.dir");
  EXPECT_EQ(std::string(set.what()).rfind("--set #1 (output.dir=runs\\xff): output.dir: 'runs\\xff'", 0), 0u)
      << set.what();
  const ConfigError key = config_error("caf\xe9: 1\n");
  EXPECT_EQ(std::string(key.what()).rfind("exp.yaml:1:1: caf\\xe9: unknown key", 0), 0u) << key.what();
}

TEST(ConfigLoad, NonUtf8PathIsEscapedInMessages) {
  testing::TempDir dir;
  const auto path = testing::write_text(dir / "caf\xe9.yaml", "seed: -1\n");
  try {
    load_config(path.string());
    FAIL() << "no error";
  } catch (const ConfigError& e) {
    EXPECT_EQ(std::string(e.what()), (dir / "caf\\xe9.yaml").string() + ":1:7: seed: must be >= 0 (got -1)");
  }
}

}  // namespace
}  // namespace gputrain::config

namespace gputrain::config {
namespace {

// Issue 17 #9: a blank or null value is an error naming the key, not the default.
TEST(ConfigSemantics, NullOrBlankValuesAreErrorsNamingTheKey) {
  struct Case {
    std::string yaml;
    std::vector<std::string> sets;
    std::string key, origin;
  };
  const std::vector<Case> cases{
      {"optim:\n  lr:\n", {}, "optim.lr", "exp.yaml"},
      {"data: {batch_size: ~}\n", {}, "data.batch_size", "exp.yaml"},
      {"optim: {lr: 0.5}\n", {"optim.lr="}, "optim.lr", "--set #1 (optim.lr=)"},
      {"data: {batch_size: 8}\n", {"data=null"}, "data", "--set #1 (data=null)"},
      {"name: x\ndata:\n", {}, "data", "exp.yaml"},
  };
  for (const auto& c : cases) {
    const ConfigError e = config_error(c.yaml, c.sets);
    EXPECT_EQ(e.key(), c.key) << c.yaml;
    EXPECT_EQ(e.where().origin, c.origin) << c.yaml;
    EXPECT_NE(std::string(e.what()).find("has no value (blank or null)"), std::string::npos) << e.what();
  }
}

// Issue 17 #10: --set section={...} merges key by key.
TEST(ConfigSemantics, SetOfAMappingMergesIntoTheSectionKeyByKey) {
  const auto loaded = load_config_text("data: {batch_size: 8, normalize: {mean: [0.5], std: [0.25]}}\n", "exp.yaml",
                                       {"data.num_workers=1", "data={shuffle: false, normalize: {std: [0.5]}}"});
  const DataConfig& d = loaded.config.data;
  EXPECT_EQ(d.batch_size, 8);
  EXPECT_EQ(d.num_workers, 1);
  EXPECT_FALSE(d.shuffle);
  EXPECT_EQ(d.normalize.mean, std::vector<double>{0.5});
  EXPECT_EQ(d.normalize.std, std::vector<double>{0.5});
  EXPECT_EQ(loaded.sources.at("data.batch_size").origin, "exp.yaml");
  EXPECT_EQ(loaded.sources.at("data.shuffle").origin, "--set #2 (data={shuffle: false, normalize: {std: [0.5]}})");
  // Errors in a merged key still cite the --set.
  const ConfigError e = config_error("data: {batch_size: 8}\n", {"data={batch_size: 0}"});
  EXPECT_EQ(e.where().origin, "--set #1 (data={batch_size: 0})");
}

// Issue 17 #11: an unknown key that only a --set introduced is blamed on that --set.
TEST(ConfigSemantics, UnknownKeyBelowASetCitesTheSet) {
  const ConfigError e = config_error("data: {batch_size: 8}\n", {"train.epochs=2", "data.foo.bar=1"});
  EXPECT_EQ(e.key(), "data.foo");
  EXPECT_EQ(e.where().origin, "--set #2 (data.foo.bar=1)");
  EXPECT_NE(std::string(e.what()).find("unknown key"), std::string::npos);
}

// yaml-cpp 0.7's LoadAll never returns on these (its parser hands back the
// same empty document forever); found by the config fuzzer.
TEST(ConfigSemantics, AStrayCommaIsMalformedYamlNotAHang) {
  for (const char* text : {",\n", ",[0seeel: {hidden: xmodelim: {lr: abc,[0]}\n", "  ,  \n"}) {
    try {
      load_config_text(text, "comma.yaml");
      ADD_FAILURE() << "no error for " << text;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("comma.yaml:1:"), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("malformed YAML"), std::string::npos) << e.what();
    }
  }
}

// Issue 17 #12: one YAML document per file; merge keys said to be unsupported.
TEST(ConfigSemantics, MultipleDocumentsAndMergeKeysAreRefused) {
  try {
    load_config_text("name: a\n---\nname: b\n", "two.yaml");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("two.yaml:3:1: a second YAML document begins here"), std::string::npos)
        << e.what();
  }
  try {
    load_config_text("base: &b {batch_size: 8}\ndata:\n  <<: *b\n  shuffle: false\n", "merge.yaml");
    FAIL() << "no error";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("merge.yaml:3:3: YAML merge keys (<<) are not supported"), std::string::npos)
        << e.what();
  }
}

// Issue 17 #13: what train would refuse, config (which loads the same way) refuses too.
TEST(ConfigSemantics, AccumulationThatDoesNotDivideTheBatchIsAConfigError) {
  const ConfigError e = config_error("data: {batch_size: 30}\ntrain: {accumulation_steps: 4}\n");
  EXPECT_EQ(e.key(), "data.batch_size");
  EXPECT_EQ(e.where().line, 1);
  EXPECT_NE(std::string(e.what()).find("30 is not divisible by train.accumulation_steps (4)"), std::string::npos);
  EXPECT_NO_THROW(load_config_text("data: {batch_size: 32}\ntrain: {accumulation_steps: 4}\n", "x"));
}

// Issue 20 #4: the batch per forward pass, or per optimizer step, or both when
// they agree. The config keeps the form as written: the plan works the numbers
// out for the run's processes (plan::stated_batch; tests/plan/run_plan_test.cpp).
TEST(ConfigSemantics, AMicroBatchAloneLeavesTheBatchPerStepToThePlan) {
  const LoadedConfig loaded = load_config_text("data:\n  micro_batch_size: 16\ntrain: {accumulation_steps: 3}\n", "x");
  EXPECT_FALSE(loaded.config.data.batch_size);
  EXPECT_EQ(*loaded.config.data.micro_batch_size, 16);
  EXPECT_EQ(loaded.config.train.accumulation_steps, 3);
  EXPECT_EQ(loaded.sources.at("data.batch_size").str(), "x:2:21");  // messages about the batch point at its statement
  // Not a multiple of the accumulation: the micro-batch is given, so nothing to divide.
  EXPECT_NO_THROW(load_config_text("data: {micro_batch_size: 5}\ntrain: {accumulation_steps: 3}\n", "x"));
  EXPECT_FALSE(load_config_text("", "x").config.data.micro_batch_size);
  EXPECT_EQ(load_config_text("", "x").config.data.batch_size, 128);
  // As dump_config writes it, the form reloads the same.
  EXPECT_EQ(dump_config(load_config_text(dump_config(loaded.config), "dump").config), dump_config(loaded.config));
}

TEST(ConfigSemantics, BothBatchFormsMustAgreeForSomeNumberOfProcesses) {
  // 96 = 16 x 3 x 2: agrees for two processes, so the file loads; the plan checks the run's count.
  const std::string both = "data: {batch_size: 96, micro_batch_size: 16}\ntrain: {accumulation_steps: 3}\n";
  const LoadedConfig two_ranks = load_config_text(both, "f.yaml");
  EXPECT_EQ(two_ranks.config.data.batch_size, 96);
  EXPECT_EQ(two_ranks.config.data.micro_batch_size, 16);
  // No process count fits: refused at load, as `gputrain config` does.
  const ConfigError e = config_error(both, {"data.batch_size=100"});
  EXPECT_EQ(e.key(), "data.batch_size");
  EXPECT_NE(std::string(e.what()).find("100 disagrees with data.micro_batch_size: 16 per forward pass x 3 "
                                       "accumulation steps make 48 per process, which 100 does not divide into"),
            std::string::npos)
      << e.what();
  EXPECT_EQ(config_error("data: {micro_batch_size: 0}\n").key(), "data.micro_batch_size");
}

// Issue 17 #6: thread counts are bounded by the machine.
TEST(ConfigSemantics, ThreadAndWorkerCountsAreBounded) {
  const int64_t limit = std::max<int64_t>(16, 4 * std::max(1u, std::thread::hardware_concurrency()));
  for (const std::string key : {"train.threads", "data.num_workers"}) {
    const ConfigError e = config_error("", {key + "=100000"});
    EXPECT_EQ(e.key(), key);
    EXPECT_NE(std::string(e.what()).find(fmt::format("must be <= {} (got 100000)", limit)), std::string::npos)
        << e.what();
    EXPECT_NO_THROW(load_config_text("", "x", {key + "=" + std::to_string(limit)}));
  }
}

}  // namespace
}  // namespace gputrain::config
