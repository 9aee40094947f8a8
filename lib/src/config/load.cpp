#include "gputrain/config/load.h"

#include <fmt/format.h>
#include <yaml-cpp/depthguard.h>  // YAML::DeepRecursion, not included by yaml.h
#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <thread>
#include <algorithm>

#include "gputrain/common/strings.h"
#include "node_reader.h"

namespace gputrain::config {

using detail::NodeReader;
using detail::OverrideMarks;

std::string default_data_root(const std::string& dataset) {
  if (dataset == "cifar10") return "datasets/cifar-10-batches-bin";
  if (dataset == "fashion_mnist") return "/usr/share/datasets/fashion-mnist";
  if (dataset == "mnist") return "datasets/mnist";
  return "";  // random and synthetic are generated in memory
}

namespace {

// An experiment file is a few kilobytes; a larger one is the wrong file (a
// data set, /dev/zero), which is refused before it is read into memory.
constexpr std::size_t kMaxConfigBytes = std::size_t{1} << 20;

UserError too_large(const std::string& origin) {
  return UserError(fmt::format("{}: larger than 1 MiB; an experiment file is a few kilobytes. Is this the right file?",
                               origin));
}

// yaml-cpp's parser recurses once per level of nesting and stops, with a
// DeepRecursion, before the stack runs out; it names the problem "bad file".
constexpr const char* kTooDeep =
    "nested too deeply to parse (an experiment file nests three levels: section, key, list)";

// yaml-cpp reads `<<` as an ordinary key; a file relying on YAML 1.1's merge
// keys would lose the merged values (or meet "unknown key '<<'"), so say why.
void reject_merge_keys(const YAML::Node& node, const std::string& origin) {
  if (node.IsMap()) {
    for (const auto& entry : node) {
      if (entry.first.IsScalar() && entry.first.Scalar() == "<<") {
        throw UserError(fmt::format("{}: YAML merge keys (<<) are not supported; write the keys out in full",
                                    detail::mark_from(entry.first.Mark(), origin).str()));
      }
      reject_merge_keys(entry.second, origin);
    }
  } else if (node.IsSequence()) {
    for (const auto& item : node) reject_merge_keys(item, origin);
  }
}

YAML::Node parse_yaml(const std::string& text, const std::string& origin) {
  if (text.size() > kMaxConfigBytes) throw too_large(origin);
  try {
    std::vector<YAML::Node> documents = YAML::LoadAll(text);
    if (documents.size() > 1) {
      throw UserError(fmt::format("{}: a second YAML document begins here; an experiment file is one document, so "
                                  "remove the '---' line and what follows, or put it in a file of its own",
                                  detail::mark_from(documents[1].Mark(), origin).str()));
    }
    YAML::Node root = documents.empty() ? YAML::Node() : documents.front();
    reject_merge_keys(root, origin);
    return root;
  } catch (const YAML::DeepRecursion& e) {
    throw UserError(fmt::format("{}: {}", detail::mark_from(e.mark, origin).str(), kTooDeep));
  } catch (const YAML::ParserException& e) {
    throw UserError(fmt::format("{}: malformed YAML: {}. Check the indentation and quoting near that position.",
                                detail::mark_from(e.mark, origin).str(), e.msg));
  }
}

// --set section={key: value, ...} into an existing section: key by key (and
// so into nested sections), leaving the section's other keys as they were.
void merge_override(YAML::Node target, const YAML::Node& value, const std::string& key, const SourceMark& mark,
                    OverrideMarks& marks) {
  for (const auto& entry : value) {
    const std::string name = entry.first.Scalar();
    YAML::Node existing = target[name];
    if (entry.second.IsMap() && existing && existing.IsMap()) {
      merge_override(existing, entry.second, key + "." + name, mark, marks);
    } else {
      target[name] = entry.second;
      marks[key + "." + name] = mark;
    }
  }
}

// Applies one --set KEY=VALUE to the document; VALUE is a YAML scalar, list or
// mapping (merged into a section key by key).
void apply_override(YAML::Node& root, const std::string& assignment, int number, OverrideMarks& marks) {
  const std::string origin = printable(fmt::format("--set #{} ({})", number, assignment));
  const auto equals = assignment.find('=');
  if (equals == std::string::npos || equals == 0) {
    throw UserError(fmt::format("{}: expected KEY=VALUE with a dotted key, e.g. --set data.batch_size=64", origin));
  }
  const std::string key(trim(std::string_view(assignment).substr(0, equals)));
  const std::vector<std::string> parts = split(key, '.');
  for (const auto& part : parts) {
    if (part.empty()) throw ConfigError({origin, 0, 0}, key, "empty part in dotted key");
  }
  YAML::Node value;
  try {
    value = YAML::Load(assignment.substr(equals + 1));
  } catch (const YAML::DeepRecursion&) {
    throw ConfigError({origin, 0, 0}, key, fmt::format("value is {}", kTooDeep));
  } catch (const YAML::ParserException& e) {
    throw ConfigError({origin, 0, 0}, key, fmt::format("value is not valid YAML: {}", e.msg));
  }
  YAML::Node cursor = root;
  for (std::size_t i = 0; i + 1 < parts.size(); ++i) {
    YAML::Node child = cursor[parts[i]];
    if (!child || child.IsNull()) {
      cursor[parts[i]] = YAML::Node(YAML::NodeType::Map);
      child = cursor[parts[i]];
    } else if (!child.IsMap()) {
      std::string parent = parts[0];
      for (std::size_t j = 1; j <= i; ++j) parent += "." + parts[j];
      throw ConfigError({origin, 0, 0}, key, fmt::format("'{}' is not a section", parent));
    }
    cursor.reset(child);
  }
  YAML::Node target = cursor[parts.back()];
  if (value.IsMap() && target && target.IsMap()) {
    merge_override(target, value, key, {origin, 0, 0}, marks);  // data={a: 1} changes data.a only
    return;
  }
  cursor[parts.back()] = value;
  marks[key] = {origin, 0, 0};
}

// Threads beyond a few per hardware thread only compete for the cores, and
// a typo (100000) would spin creating them: refuse more than this.
int64_t max_threads() {
  const unsigned hardware = std::max(1u, std::thread::hardware_concurrency());
  return std::max<int64_t>(16, 4 * static_cast<int64_t>(hardware));
}

void check_thread_count(const NodeReader& r, const std::string& key, int64_t value) {
  if (value > max_threads()) {
    r.fail(key, fmt::format("must be <= {} (got {}): 4 per hardware thread of this machine ({}) at most, as more "
                            "only compete for the cores",
                            max_threads(), value, std::max(1u, std::thread::hardware_concurrency())));
  }
}

const std::vector<std::string> kDatasets{"random", "synthetic", "cifar10", "fashion_mnist", "mnist"};

void read_data(NodeReader r, DataConfig& d) {
  r.read_choice("dataset", d.dataset, kDatasets);
  r.read("root", d.root);
  if (d.root.empty()) d.root = default_data_root(d.dataset);
  r.read_at_least("batch_size", d.batch_size, 1);
  r.read_at_least("test_batch_size", d.test_batch_size, 0);
  r.read_at_least("num_workers", d.num_workers, 0);
  check_thread_count(r, "num_workers", d.num_workers);
  r.read_at_least("prefetch", d.prefetch, 0);
  r.read("pin_memory", d.pin_memory);
  r.read("shuffle", d.shuffle);
  r.read("drop_last", d.drop_last);
  r.read("device_cache", d.device_cache);
  {
    NodeReader n = r.section("normalize");
    n.read("mean", d.normalize.mean);
    n.read("std", d.normalize.std);
    if (d.normalize.mean.size() != d.normalize.std.size()) {
      n.fail("std", fmt::format("needs as many values as mean ({} vs {})", d.normalize.std.size(),
                                d.normalize.mean.size()));
    }
    for (double s : d.normalize.std) {
      if (!(s > 0)) n.fail("std", fmt::format("every value must be > 0 (got {})", s));
    }
    n.reject_unknown_keys();
  }
  {
    NodeReader a = r.section("augment");
    a.read_at_least("random_crop", d.augment.random_crop, 0);
    a.read("hflip", d.augment.hflip);
    a.reject_unknown_keys();
  }
  r.read_at_least("length", d.length, 1);
  r.read_at_least("input_size", d.input_size, 1);
  r.read_at_least("samples", d.samples, 1);
  r.read_at_least("test_samples", d.test_samples, 0);
  r.read_at_least("features", d.features, 1);
  r.read_at_least("classes", d.classes, 2);
  r.read_at_least("targets", d.targets, 0);
  r.reject_unknown_keys();
}

void read_model(NodeReader r, ModelConfig& m) {
  r.read_choice("name", m.name, {"linear", "mlp", "cifar10_cnn"});
  r.read("in_features", m.in_features);
  if (m.in_features && *m.in_features < 1) r.fail("in_features", fmt::format("must be >= 1 (got {})", *m.in_features));
  r.read("out_features", m.out_features);
  if (m.out_features && *m.out_features < 1) {
    r.fail("out_features", fmt::format("must be >= 1 (got {})", *m.out_features));
  }
  r.read("hidden", m.hidden);
  for (int64_t width : m.hidden) {
    if (width < 1) r.fail("hidden", fmt::format("every width must be >= 1 (got {})", width));
  }
  r.read_choice("activation", m.activation, {"relu", "gelu", "tanh"});
  r.read("dropout", m.dropout);
  if (!(m.dropout >= 0 && m.dropout < 1)) r.fail("dropout", fmt::format("must be in [0, 1) (got {})", m.dropout));
  r.reject_unknown_keys();
}

void read_optim(NodeReader r, OptimConfig& o) {
  r.read_choice("name", o.name, {"sgd", "adam", "adamw"});
  r.read("lr", o.lr);
  if (!(o.lr > 0)) r.fail("lr", fmt::format("must be > 0 (got {})", o.lr));
  r.read("momentum", o.momentum);
  if (!(o.momentum >= 0 && o.momentum < 1)) r.fail("momentum", fmt::format("must be in [0, 1) (got {})", o.momentum));
  r.read_at_least("weight_decay", o.weight_decay, 0.0);
  r.read("nesterov", o.nesterov);
  if (o.nesterov && o.momentum == 0) r.fail("nesterov", "needs optim.momentum > 0");
  r.read("betas", o.betas);
  if (o.betas.size() != 2) r.fail("betas", fmt::format("needs two values [beta1, beta2] (got {})", o.betas.size()));
  for (double b : o.betas) {
    if (!(b >= 0 && b < 1)) r.fail("betas", fmt::format("every value must be in [0, 1) (got {})", b));
  }
  r.read("eps", o.eps);
  if (!(o.eps > 0)) r.fail("eps", fmt::format("must be > 0 (got {})", o.eps));
  r.read_choice("scheduler", o.scheduler, {"none", "step", "cosine", "onecycle"});
  r.read_at_least("step_size", o.step_size, 1);
  r.read("gamma", o.gamma);
  if (!(o.gamma > 0 && o.gamma <= 1)) r.fail("gamma", fmt::format("must be in (0, 1] (got {})", o.gamma));
  r.read_at_least("warmup_steps", o.warmup_steps, 0);
  r.read("foreach", o.foreach);
  r.read("fused", o.fused);
  if (o.foreach && o.fused) r.fail("fused", "optim.foreach and optim.fused are alternatives; set at most one");
  r.reject_unknown_keys();
}

void read_train(NodeReader r, TrainConfig& t, const std::string& device) {
  r.read_at_least("epochs", t.epochs, 1);
  r.read_choice("loss", t.loss, {"auto", "cross_entropy", "mse"});
  r.read_choice("amp", t.amp, {"off", "fp16", "bf16"});
  if (t.amp == "fp16" && device == "cpu") {
    r.fail("amp", "fp16 autocast needs CUDA; on CPU use bf16 (train.amp: bf16)");
  }
  r.read_at_least("accumulation_steps", t.accumulation_steps, 1);
  r.read_at_least("grad_clip", t.grad_clip, 0.0);
  r.read_at_least("log_every", t.log_every, 1);
  r.read("log_replicas", t.log_replicas);
  r.read("class_weights", t.class_weights);
  for (double w : t.class_weights) {
    if (!(w > 0) || !std::isfinite(w)) r.fail("class_weights", fmt::format("every weight must be > 0 (got {})", w));
  }
  r.read_choice("on_nan", t.on_nan, {"stop", "skip"});
  r.read_choice("on_sigint", t.on_sigint, {"checkpoint", "stop", "none"});
  r.read("cuda_graph", t.cuda_graph);
  r.read("channels_last", t.channels_last);
  r.read("cudnn_benchmark", t.cudnn_benchmark);
  r.read_at_least("threads", t.threads, 0);
  check_thread_count(r, "threads", t.threads);
  r.read_choice("matmul_precision", t.matmul_precision, {"auto", "highest", "high", "medium"});
  r.read("tensorboard", t.tensorboard);
  r.read_at_least("monitor_ms", t.monitor_ms, 0);
  // Below 10 ms the sampling itself would cost more than it tells.
  if (t.monitor_ms > 0 && t.monitor_ms < 10) {
    r.fail("monitor_ms", fmt::format("must be 0 (off) or >= 10 (got {})", t.monitor_ms));
  }
  r.reject_unknown_keys();
}

void read_gpus(NodeReader& r, GpuSelection& gpus) {
  const YAML::Node node = r.raw("gpus");
  if (!node || node.IsNull()) return;
  if (node.IsScalar() && node.Scalar() == "all") {
    gpus = GpuSelection{};
    return;
  }
  std::vector<int64_t> indices;
  r.read("gpus", indices);  // a single index or a list of them
  if (indices.empty()) r.fail("gpus", "needs 'all' or at least one GPU index, e.g. [0, 1]");
  std::set<int64_t> seen;
  for (int64_t index : indices) {
    if (index < 0) r.fail("gpus", fmt::format("GPU indices are >= 0 (got {})", index));
    if (!seen.insert(index).second) r.fail("gpus", fmt::format("GPU {} is listed twice", index));
  }
  gpus.all = false;
  gpus.indices = std::move(indices);
}

ExperimentConfig read_experiment(const YAML::Node& root, const std::string& origin, const OverrideMarks& overrides,
                                 SourceMap& sources) {
  ExperimentConfig c;
  NodeReader r(root, origin, "", overrides, sources);
  r.read("name", c.name);
  static const std::regex kSafeName("[A-Za-z0-9][A-Za-z0-9._-]*");
  if (!std::regex_match(c.name, kSafeName)) {
    r.fail("name", fmt::format("'{}' must start with a letter or digit and use only letters, digits, '.', '_' "
                               "and '-' (it names the run directory)",
                               c.name));
  }
  int64_t seed = 0;
  r.read_at_least("seed", seed, 0);
  c.seed = static_cast<uint64_t>(seed);
  r.read("device", c.device);
  static const std::regex kDevice("auto|cpu|cuda|cuda:[0-9]+|mps");
  if (!std::regex_match(c.device, kDevice)) {
    r.fail("device", fmt::format("unknown device '{}'; allowed: auto, cpu, cuda, cuda:N or mps", c.device));
  }
  read_gpus(r, c.gpus);
  r.read_choice("strategy", c.strategy, {"auto", "single", "dp", "ddp"});
  read_data(r.section("data"), c.data);
  read_model(r.section("model"), c.model);
  read_optim(r.section("optim"), c.optim);
  read_train(r.section("train"), c.train, c.device);
  // Checked here, not only when training starts, so that `gputrain config` refuses what `train` would.
  if (c.data.batch_size % c.train.accumulation_steps != 0) {
    throw ConfigError(sources.at("data.batch_size"), "data.batch_size",
                      fmt::format("{} is not divisible by train.accumulation_steps ({}); batch_size is the batch per "
                                  "optimizer step and each micro-batch takes an equal share",
                                  c.data.batch_size, c.train.accumulation_steps));
  }
  {
    NodeReader dp = r.section("dp");
    dp.read_at_least("replicas", c.dp.replicas, 0);
    dp.reject_unknown_keys();
  }
  {
    NodeReader ddp = r.section("ddp");
    ddp.read_choice("backend", c.ddp.backend, {"auto", "nccl", "gloo"});
    ddp.read_at_least("timeout_s", c.ddp.timeout_s, 1);
    ddp.reject_unknown_keys();
  }
  {
    NodeReader ck = r.section("checkpoint");
    ck.read("dir", c.checkpoint.dir);
    if (c.checkpoint.dir.empty()) ck.fail("dir", "must not be empty");
    // It lives inside the run directory: a fresh run moves it aside, and
    // rotation deletes files in it, so it must not reach anything else.
    {
      const std::filesystem::path dir(c.checkpoint.dir);
      bool climbs = false;
      for (const auto& part : dir) climbs |= part == "..";
      if (dir.is_absolute() || climbs || dir.lexically_normal() == ".") {
        ck.fail("dir", fmt::format("must be a directory inside the run directory: a relative path without '..' "
                                   "(got '{}')",
                                   c.checkpoint.dir));
      }
    }
    ck.read_at_least("every", c.checkpoint.every, 0);
    ck.read_at_least("every_steps", c.checkpoint.every_steps, 0);
    ck.read_at_least("keep", c.checkpoint.keep, 1);
    ck.reject_unknown_keys();
  }
  {
    NodeReader out = r.section("output");
    out.read("dir", c.output.dir);
    if (c.output.dir.empty()) out.fail("dir", "must not be empty");
    out.reject_unknown_keys();
  }
  r.reject_unknown_keys();
  return c;
}

LoadedConfig load_document(YAML::Node root, const std::string& origin, const std::vector<std::string>& overrides) {
  if (!root || root.IsNull()) root = YAML::Node(YAML::NodeType::Map);
  if (!root.IsMap()) {
    throw UserError(fmt::format("{}: the experiment file must be a mapping of keys (name:, data:, model:, ...)",
                                detail::mark_from(root.Mark(), origin).str()));
  }
  OverrideMarks marks;
  for (std::size_t i = 0; i < overrides.size(); ++i) {
    apply_override(root, overrides[i], static_cast<int>(i + 1), marks);
  }
  LoadedConfig loaded;
  loaded.config = read_experiment(root, origin, marks, loaded.sources);
  return loaded;
}

}  // namespace

LoadedConfig load_config_text(const std::string& yaml, const std::string& origin,
                              const std::vector<std::string>& overrides) {
  return load_document(parse_yaml(yaml, origin), origin, overrides);
}

LoadedConfig load_config(const std::string& path, const std::vector<std::string>& overrides) {
  const std::string origin = printable(path);
  std::error_code error;
  if (std::filesystem::is_directory(path, error)) {
    throw UserError(fmt::format("{}: is a directory; --config takes an experiment file", origin));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    throw UserError(fmt::format("{}: cannot open the experiment file ({}). Check the path given to --config.", origin,
                                std::strerror(errno)));
  }
  // One byte past the limit is enough to know the file is too large.
  std::string text(kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  if (in.bad()) throw UserError(fmt::format("{}: cannot read the experiment file ({})", origin, std::strerror(errno)));
  text.resize(static_cast<std::size_t>(in.gcount()));
  return load_config_text(text, origin, overrides);
}

namespace {
// Shortest text that reads back to the same double.
std::string number(double value) { return fmt::format("{}", value); }

template <typename T>
void emit_list(YAML::Emitter& out, const std::vector<T>& values) {
  out << YAML::Flow << YAML::BeginSeq;
  for (const auto& v : values) {
    if constexpr (std::is_floating_point_v<T>) {
      out << number(v);
    } else {
      out << v;
    }
  }
  out << YAML::EndSeq;
}

void emit_optional(YAML::Emitter& out, const std::optional<int64_t>& value) {
  if (value) {
    out << *value;
  } else {
    out << "auto";
  }
}
}  // namespace

std::string dump_config(const ExperimentConfig& c) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << c.name;
  out << YAML::Key << "seed" << YAML::Value << c.seed;
  out << YAML::Key << "device" << YAML::Value << c.device;
  out << YAML::Key << "gpus" << YAML::Value;
  if (c.gpus.all) {
    out << "all";
  } else {
    emit_list(out, c.gpus.indices);
  }
  out << YAML::Key << "strategy" << YAML::Value << c.strategy;

  const DataConfig& d = c.data;
  out << YAML::Key << "data" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "dataset" << YAML::Value << d.dataset;
  out << YAML::Key << "root" << YAML::Value << YAML::DoubleQuoted << d.root;
  out << YAML::Key << "batch_size" << YAML::Value << d.batch_size;
  out << YAML::Key << "test_batch_size" << YAML::Value << d.test_batch_size;
  out << YAML::Key << "num_workers" << YAML::Value << d.num_workers;
  out << YAML::Key << "prefetch" << YAML::Value << d.prefetch;
  out << YAML::Key << "pin_memory" << YAML::Value << d.pin_memory;
  out << YAML::Key << "shuffle" << YAML::Value << d.shuffle;
  out << YAML::Key << "drop_last" << YAML::Value << d.drop_last;
  out << YAML::Key << "device_cache" << YAML::Value;
  if (d.device_cache == Switch::kAuto) {
    out << "auto";
  } else {
    out << (d.device_cache == Switch::kOn);
  }
  out << YAML::Key << "normalize" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "mean" << YAML::Value;
  emit_list(out, d.normalize.mean);
  out << YAML::Key << "std" << YAML::Value;
  emit_list(out, d.normalize.std);
  out << YAML::EndMap;
  out << YAML::Key << "augment" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "random_crop" << YAML::Value << d.augment.random_crop;
  out << YAML::Key << "hflip" << YAML::Value << d.augment.hflip;
  out << YAML::EndMap;
  out << YAML::Key << "length" << YAML::Value << d.length;
  out << YAML::Key << "input_size" << YAML::Value << d.input_size;
  out << YAML::Key << "samples" << YAML::Value << d.samples;
  out << YAML::Key << "test_samples" << YAML::Value << d.test_samples;
  out << YAML::Key << "features" << YAML::Value << d.features;
  out << YAML::Key << "classes" << YAML::Value << d.classes;
  out << YAML::Key << "targets" << YAML::Value << d.targets;
  out << YAML::EndMap;

  const ModelConfig& m = c.model;
  out << YAML::Key << "model" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << m.name;
  out << YAML::Key << "in_features" << YAML::Value;
  emit_optional(out, m.in_features);
  out << YAML::Key << "out_features" << YAML::Value;
  emit_optional(out, m.out_features);
  out << YAML::Key << "hidden" << YAML::Value;
  emit_list(out, m.hidden);
  out << YAML::Key << "activation" << YAML::Value << m.activation;
  out << YAML::Key << "dropout" << YAML::Value << number(m.dropout);
  out << YAML::EndMap;

  const OptimConfig& o = c.optim;
  out << YAML::Key << "optim" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << o.name;
  out << YAML::Key << "lr" << YAML::Value << number(o.lr);
  out << YAML::Key << "momentum" << YAML::Value << number(o.momentum);
  out << YAML::Key << "weight_decay" << YAML::Value << number(o.weight_decay);
  out << YAML::Key << "nesterov" << YAML::Value << o.nesterov;
  out << YAML::Key << "betas" << YAML::Value;
  emit_list(out, o.betas);
  out << YAML::Key << "eps" << YAML::Value << number(o.eps);
  out << YAML::Key << "scheduler" << YAML::Value << o.scheduler;
  out << YAML::Key << "step_size" << YAML::Value << o.step_size;
  out << YAML::Key << "gamma" << YAML::Value << number(o.gamma);
  out << YAML::Key << "warmup_steps" << YAML::Value << o.warmup_steps;
  out << YAML::Key << "foreach" << YAML::Value << o.foreach;
  out << YAML::Key << "fused" << YAML::Value << o.fused;
  out << YAML::EndMap;

  const TrainConfig& t = c.train;
  out << YAML::Key << "train" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "epochs" << YAML::Value << t.epochs;
  out << YAML::Key << "loss" << YAML::Value << t.loss;
  out << YAML::Key << "amp" << YAML::Value << t.amp;
  out << YAML::Key << "accumulation_steps" << YAML::Value << t.accumulation_steps;
  out << YAML::Key << "grad_clip" << YAML::Value << number(t.grad_clip);
  out << YAML::Key << "log_every" << YAML::Value << t.log_every;
  out << YAML::Key << "log_replicas" << YAML::Value << t.log_replicas;
  out << YAML::Key << "class_weights" << YAML::Value;
  emit_list(out, t.class_weights);
  out << YAML::Key << "on_nan" << YAML::Value << t.on_nan;
  out << YAML::Key << "on_sigint" << YAML::Value << t.on_sigint;
  out << YAML::Key << "cuda_graph" << YAML::Value << t.cuda_graph;
  out << YAML::Key << "channels_last" << YAML::Value << t.channels_last;
  out << YAML::Key << "cudnn_benchmark" << YAML::Value << t.cudnn_benchmark;
  out << YAML::Key << "threads" << YAML::Value << t.threads;
  out << YAML::Key << "matmul_precision" << YAML::Value << t.matmul_precision;
  out << YAML::Key << "tensorboard" << YAML::Value << t.tensorboard;
  out << YAML::Key << "monitor_ms" << YAML::Value << t.monitor_ms;
  out << YAML::EndMap;

  out << YAML::Key << "dp" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "replicas" << YAML::Value << c.dp.replicas;
  out << YAML::EndMap;
  out << YAML::Key << "ddp" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "backend" << YAML::Value << c.ddp.backend;
  out << YAML::Key << "timeout_s" << YAML::Value << c.ddp.timeout_s;
  out << YAML::EndMap;
  out << YAML::Key << "checkpoint" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "dir" << YAML::Value << YAML::DoubleQuoted << c.checkpoint.dir;
  out << YAML::Key << "every" << YAML::Value << c.checkpoint.every;
  out << YAML::Key << "every_steps" << YAML::Value << c.checkpoint.every_steps;
  out << YAML::Key << "keep" << YAML::Value << c.checkpoint.keep;
  out << YAML::EndMap;
  out << YAML::Key << "output" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "dir" << YAML::Value << YAML::DoubleQuoted << c.output.dir;
  out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace gputrain::config
