#include "gputrain/config/schema.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "gputrain/common/error.h"
#include "gputrain/config/load.h"
#include "support/paths.h"

namespace gputrain::config {
namespace {

// The dotted name of every declared key, in declaration order.
class KeyLister : public KeysOnly {
 public:
  explicit KeyLister(std::vector<std::string>& keys, std::string prefix = "")
      : keys_(keys), prefix_(std::move(prefix)) {}
  template <typename T, typename C>
  void field(const char* key, T&, const C&, const char*) {
    keys_.push_back(prefix_ + key);
  }
  template <typename S>
  void section(const char* key, S& sub) {
    KeyLister inner(keys_, prefix_ + key + ".");
    visit(inner, sub);
  }

 private:
  std::vector<std::string>& keys_;
  std::string prefix_;
};

std::vector<std::string> declared_keys() {
  std::vector<std::string> keys;
  ExperimentConfig config;
  KeyLister lister(keys);
  visit(lister, config);
  return keys;
}

// A network with a layer of each kind of value: integers, reals, booleans, names and nested lists.
std::vector<LayerConfig> every_kind_of_layer() {
  const auto layer = [](LayerType type, std::map<std::string, double> values = {}, std::string name = "") {
    LayerConfig layer;
    layer.type = type;
    layer.values = std::move(values);
    layer.name = std::move(name);
    return layer;
  };
  LayerConfig residual = layer(LayerType::kResidual, {}, "block");
  residual.layers = {layer(LayerType::kConv2d, {{"out_channels", 4}, {"kernel", 3}, {"stride", 2}, {"bias", 0}}),
                     layer(LayerType::kBatchnorm, {{"momentum", 0.25}})};
  residual.shortcut = {layer(LayerType::kConv2d, {{"out_channels", 4}, {"kernel", 1}, {"stride", 2}})};
  LayerConfig stage = layer(LayerType::kSequential, {}, "stage");  // its list, and an inline residual, dumped too
  LayerConfig inline_residual = layer(LayerType::kResidual, {{"inline", 1}});
  inline_residual.layers = {layer(LayerType::kRelu, {}, "0")};
  stage.layers = {inline_residual};
  return {residual, stage, layer(LayerType::kLeakyRelu, {{"negative_slope", 0.5}}), layer(LayerType::kFlatten),
          layer(LayerType::kLinear, {}, "head")};
}

// Gives the key named `target` a valid value other than the one it has.
class Perturber : public KeysOnly {
 public:
  Perturber(std::string target, std::string prefix = "") : target_(std::move(target)), prefix_(std::move(prefix)) {}
  template <typename T, typename C>
  void field(const char* key, T& value, const C&, const char*) {
    if (prefix_ + key == target_) change(value);
  }
  template <typename S>
  void section(const char* key, S& sub) {
    Perturber inner(target_, prefix_ + key + ".");
    visit(inner, sub);
  }

 private:
  static void change(std::string& value) { value = value == "auto" ? "cpu" : value + "x"; }
  static void change(bool& value) { value = !value; }
  static void change(int64_t& value) { value += 1; }
  static void change(uint64_t& value) { value += 1; }
  static void change(double& value) { value = value / 2 + 0.25; }  // stays in [0, 1) from there
  static void change(Switch& value) { value = value == Switch::kOn ? Switch::kOff : Switch::kOn; }
  static void change(std::optional<int64_t>& value) { value = value.value_or(0) + 3; }
  static void change(GpuSelection& value) { value = {false, {0}}; }
  static void change(DeviceRequest& value) {
    value = value.kind == DeviceKind::kAuto ? DeviceRequest{DeviceKind::kCpu, std::nullopt} : DeviceRequest{};
  }
  static void change(ResumeFrom& value) {
    value = value.kind == ResumeFrom::Kind::kAuto
                ? ResumeFrom{ResumeFrom::Kind::kCheckpoint, "runs/a/checkpoints/x.ckpt"}
                : ResumeFrom{};
  }
  static void change(MemoryBudget& value) { value.bytes = value.bytes.value_or(0) + (1 << 30); }
  static void change(std::vector<LayerConfig>& value) { value = every_kind_of_layer(); }
  static void change(std::vector<int64_t>& value) { value.push_back(7); }
  static void change(std::vector<std::string>& value) { value.push_back("fc"); }
  static void change(std::map<std::string, std::string>& value) { value["team"] = "vision"; }
  static void change(std::vector<double>& value) {
    if (value.empty())
      value.push_back(0.5);
    else
      change(value.front());
  }
  template <typename E, typename = std::enable_if_t<std::is_enum_v<E>>>
  static void change(E& value) {
    const auto words = choices(value).words();
    for (std::size_t i = 0; i < words.size(); ++i) {
      if (words[i] == word(value)) {
        value = *choices(value).parse(words[(i + 1) % words.size()]);
        return;
      }
    }
  }

  std::string target_;
  std::string prefix_;
};

// The defaults as `gputrain config` resolves them (data.root filled in).
ExperimentConfig resolved_defaults() { return load_config_text("", "defaults.yaml").config; }

ExperimentConfig with_changed(const std::string& key) {
  ExperimentConfig config = resolved_defaults();
  Perturber perturber(key);
  visit(perturber, config);
  // An address, not any text.
  if (key == "tracking.mlflow.uri") config.tracking.mlflow.uri = "http://127.0.0.1:5000";
  // 0.5, the one fixed point of change(double).
  if (key == "optim.lookahead.alpha") config.optim.lookahead.alpha = 0.75;
  // Keys whose valid values depend on another key.
  if (config.optim.nesterov) config.optim.momentum = 0.9;
  if (!config.model.layers.empty()) config.model.name = ModelName::kLayers;
  if (config.model.name == ModelName::kLayers && config.model.layers.empty()) {
    config.model.layers = every_kind_of_layer();
  }
  if (config.optim.warmup_fraction > 0 || config.optim.cooldown_fraction > 0) {
    config.optim.scheduler = SchedulerName::kLinearWarmupDecay;
  }
  if (config.data.micro_batch_size) {
    config.data.batch_size = *config.data.micro_batch_size * config.train.accumulation_steps;
  }
  if (config.train.target_batch > 0) config.data.batch_size = config.train.target_batch;
  if (config.model.init_strict || !config.model.init_map.empty()) config.model.init_from = "weights.safetensors";
  if (config.model.unfreeze_lr_multiplier != 1) config.model.freeze_epochs = 2;
  if (config.model.freeze_epochs > 0) config.model.freeze = {"fc1"};
  if (config.data.augment.reflect) config.data.augment.random_crop = 2;
  if (config.data.augment.alternating_flip) config.data.augment.hflip = true;
  if (config.data.normalize.mean.size() != config.data.normalize.std.size()) {
    config.data.normalize.mean = {0.5};
    config.data.normalize.std = {0.5};
  }
  return config;
}

TEST(ConfigSchema, DumpWritesEveryDeclaredKey) {
  std::vector<std::string> written;
  for (const auto& [key, value] : flatten_config(resolved_defaults())) written.push_back(key);
  std::vector<std::string> declared = declared_keys();
  std::sort(declared.begin(), declared.end());
  EXPECT_EQ(written, declared);
  EXPECT_GE(declared.size(), 70u);
}

// A key the dumper or the reader forgot would come back as its default on resume.
TEST(ConfigSchema, EveryKeySurvivesDumpAndReload) {
  const auto defaults = flatten_config(resolved_defaults());
  for (const std::string& key : declared_keys()) {
    const ExperimentConfig changed = with_changed(key);
    const auto expected = flatten_config(changed);
    EXPECT_NE(expected.at(key), defaults.at(key)) << key << " was not changed by the test";
    try {
      const auto reloaded = flatten_config(load_config_text(dump_config(changed), "dumped.yaml").config);
      EXPECT_EQ(reloaded, expected) << key;
    } catch (const Error& e) {
      ADD_FAILURE() << key << ": " << e.what();
    }
  }
}

TEST(ConfigSchema, EveryChoiceWordParsesToItsValue) {
  const auto round_trips = [](const auto& table) {
    for (const std::string& word : table.words()) {
      const auto value = table.parse(word);
      ASSERT_TRUE(value.has_value()) << word;
      EXPECT_EQ(table.word(*value), word);
    }
    EXPECT_FALSE(table.parse("fp61").has_value());
  };
  round_trips(kDatasetNames);
  round_trips(kImageDecodes);
  round_trips(kModelNames);
  round_trips(kActivations);
  round_trips(kOptimizerNames);
  round_trips(kSchedulerNames);
  round_trips(kLossNames);
  round_trips(kAmpModes);
  round_trips(kOnNan);
  round_trips(kOnSigint);
  round_trips(kMatmulPrecisions);
  round_trips(kStrategyNames);
  round_trips(kDdpBackends);
  round_trips(kFrozenBatchnorms);
  round_trips(kLayerTypes);
}

// An unknown word is caught where the file says it, for every choice key.
TEST(ConfigSchema, UnknownChoiceWordsAreErrorsAtTheirPosition) {
  const std::vector<std::pair<std::string, std::string>> cases{{"data", "dataset"},     {"model", "name"},
                                                               {"model", "activation"}, {"optim", "name"},
                                                               {"optim", "scheduler"},  {"train", "loss"},
                                                               {"train", "amp"},        {"train", "on_nan"},
                                                               {"train", "on_sigint"},  {"train", "matmul_precision"},
                                                               {"ddp", "backend"}};
  for (const auto& [section, key] : cases) {
    try {
      load_config_text(section + ":\n  " + key + ": swish\n", "exp.yaml");
      ADD_FAILURE() << section << "." << key << " accepted 'swish'";
    } catch (const ConfigError& e) {
      EXPECT_EQ(e.key(), section + "." + key);
      const std::string prefix = "exp.yaml:2:" + std::to_string(key.size() + 5) + ": " + section + "." + key +
                                 ": unknown value 'swish'; allowed: ";
      EXPECT_EQ(std::string(e.what()).rfind(prefix, 0), 0u) << e.what();
    }
  }
  EXPECT_THROW(load_config_text("strategy: swish\n", "exp.yaml"), ConfigError);
}

// Issue 17 #19: a tiny std made the inputs, and so the loss, infinite.
TEST(ConfigSchema, NormalizeStdHasASaneMinimum) {
  try {
    load_config_text("data: {normalize: {mean: [0.5], std: [1e-300]}}\n", "exp.yaml");
    ADD_FAILURE() << "std 1e-300 was accepted";
  } catch (const ConfigError& e) {
    EXPECT_EQ(e.key(), "data.normalize.std");
    EXPECT_NE(std::string(e.what()).find("every value must be >= 1e-06"), std::string::npos) << e.what();
  }
  EXPECT_NO_THROW(load_config_text("data: {normalize: {mean: [0.5], std: [1e-3]}}\n", "exp.yaml"));
}

// What a resumed run may not change is a tag on each key in the schema; the key table says it too.
TEST(ConfigSchema, KeysFixedOnResumeAreDeclaredInTheSchema) {
  for (const char* key : {"seed", "model.name", "model.layers", "model.hidden", "data.dataset", "data.classes",
                          "data.input_size", "optim.name"}) {
    EXPECT_TRUE(is_fixed_on_resume(key, false)) << key;
  }
  for (const char* key : {"data.batch_size", "data.shuffle", "data.drop_last", "train.accumulation_steps"}) {
    EXPECT_FALSE(is_fixed_on_resume(key, false)) << key;
    EXPECT_TRUE(is_fixed_on_resume(key, true)) << key;
  }
  for (const char* key : {"train.epochs", "optim.lr", "data.root", "name", "modelx", "data.dataset_extra"}) {
    EXPECT_FALSE(is_fixed_on_resume(key, true)) << key;
  }
  const std::string table = key_table();
  EXPECT_NE(table.find("| `seed` | 0 | >= 0 | seeds weights, data order, augmentation and generated data. Fixed on "
                       "resume |"),
            std::string::npos);
  EXPECT_NE(table.find("drop the training split's last short batch. Fixed on resume inside an epoch |"),
            std::string::npos);
}

// configs/README.md's key table is generated (`gputrain config --keys`); this keeps it current.
TEST(ConfigSchema, ReadmeKeyTableIsCurrent) {
  const std::filesystem::path readme = std::filesystem::path(testing::kSourceDir) / "configs" / "README.md";
  std::ifstream in(readme);
  std::stringstream text;
  text << in.rdbuf();
  const std::string content = text.str();
  const std::string begin = "<!-- keys:begin (generated by `gputrain config --keys`) -->\n";
  const std::string end = "<!-- keys:end -->";
  const auto from = content.find(begin);
  const auto to = content.find(end);
  ASSERT_NE(from, std::string::npos) << readme << " has no " << begin;
  ASSERT_NE(to, std::string::npos) << readme << " has no " << end;
  EXPECT_EQ(content.substr(from + begin.size(), to - from - begin.size()), key_table())
      << "regenerate the table in " << readme << " with `gputrain config --keys`";
}

}  // namespace
}  // namespace gputrain::config
