#include "gputrain/report/dry_run.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>

#include "gputrain/checkpoint/store.h"
#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"
#include "gputrain/config/config_errors.h"
#include "gputrain/config/load.h"
#include "gputrain/config/output_paths.h"
#include "gputrain/data/batch_loader.h"
#include "gputrain/data/dataset.h"
#include "gputrain/data/host_loader.h"
#include "gputrain/device/host_resources.h"
#include "gputrain/device/memory.h"
#include "gputrain/device/probe.h"
#include "gputrain/plan/batch_plan.h"
#include "gputrain/plan/fast_paths.h"
#include "gputrain/plan/run_plan.h"
#include "gputrain/plan/step_memory.h"
#include "gputrain/report/run_dir.h"
#include "gputrain/report/run_info.h"
#include "gputrain/step/running_sums.h"

namespace gputrain::report {

namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

json visible_devices(const device::DeviceInventory& inventory) {
  json gpus = json::array();
  for (const auto& gpu : inventory.gpus) {
    gpus.push_back({{"logical", gpu.logical_index},
                    {"physical", gpu.physical_id},
                    {"name", gpu.name},
                    {"memory", bytes_text(gpu.total_memory)},
                    {"free", gpu.free_memory ? bytes_text(*gpu.free_memory) : "unknown"}});
  }
  return {{"cuda_visible_devices", inventory.cuda_visible_devices ? *inventory.cuda_visible_devices : "(unset)"},
          {"gpus", gpus}};
}

json splits_json(const std::vector<parallel::ReplicaSplit>& splits) {
  json out = json::array();
  // ddp's shares are named by rank; dp's replicas may share a device (CPU threads), so by number.
  for (const auto& split : splits) {
    out.push_back(split.device.rfind("rank ", 0) == 0
                      ? fmt::format("{}: {}", split.device, split.rows())
                      : fmt::format("replica {} ({}): {}", split.replica, split.device, split.rows()));
  }
  return out;
}

json batch_section(const config::DataConfig& data, const plan::BatchPlan& batches, const RunInfo& info,
                   int64_t processes) {
  json batch{{"per_optimizer_step", batches.global},
             {"micro_batch_size", batches.micro / processes},
             {"accumulation_steps", batches.accumulation},
             {"processes", processes},
             {"micro_batch", batches.micro},
             {"last_micro_batch", batches.last_micro},
             {"steps_per_epoch", batches.steps_per_epoch},
             {"stated_as", data.micro_batch_size ? "data.micro_batch_size" : "data.batch_size"}};
  if (!info.full_split.empty()) {
    batch["full_split"] = splits_json(info.full_split);
    batch["last_split"] = splits_json(info.last_split);
  }
  return batch;
}

int64_t bytes_on_disk(const config::DataConfig& data) {
  if (data.dataset == config::DatasetName::kRandom || data.dataset == config::DatasetName::kSynthetic) return 0;
  std::error_code error;
  if (fs::is_regular_file(data.root, error)) return static_cast<int64_t>(fs::file_size(data.root, error));  // an .npz
  int64_t bytes = 0;
  for (fs::recursive_directory_iterator it(data.root, error), end; !error && it != end; it.increment(error)) {
    if (it->is_regular_file(error)) bytes += static_cast<int64_t>(it->file_size(error));
  }
  return bytes;
}

// The nearest directory that exists at or above `path`.
fs::path existing_ancestor(fs::path path) {
  std::error_code error;
  path = fs::absolute(path, error);
  while (!path.empty() && !fs::exists(path, error) && path != path.parent_path()) path = path.parent_path();
  return path;
}

// Whether train could create or write `dir` (run directory, checkpoints).
void check_writable(const fs::path& dir, const char* key) {
  const fs::path at = existing_ancestor(dir);
  std::error_code error;
  if (!fs::is_directory(at, error)) {
    throw UserError(
        fmt::format("{}: cannot be created: {} is a file, not a directory; choose another {} or move "
                    "the file away",
                    dir.string(), at.string(), key));
  }
  if (access(at.c_str(), W_OK | X_OK) != 0) {
    throw UserError(
        fmt::format("{}: cannot be written ({} is not writable by this user); choose another {} or fix "
                    "the directory's permissions",
                    dir.string(), at.string(), key));
  }
}

// Bytes a device has free for the run: the driver's count on CUDA, the host's
// available memory elsewhere (shared by every replica there).
int64_t free_bytes(const torch::Device& device, const std::string& meminfo) {
  return device.is_cuda() ? device::free_memory(device) : device::host_available_memory(meminfo);
}

struct MeasuredStep {
  plan::StepMemory memory;
  int64_t measured_rows = 0;
};

// Builds the model on the primary device and runs one measured step on the
// largest share of a micro-batch any device gets. On the CPU a step larger
// than the host's memory is no error but the kernel ending the process (plan
// itself, exit 137, on 3000 x 3000 images): a step of 2 samples, scaled to the
// share, is judged first, and the share's step runs only if that fits.
MeasuredStep measure_step(const plan::RunPlan& run, const RunInfo& info, const std::string& meminfo) {
  const config::ExperimentConfig& c = run.loaded.config;
  const torch::Device device = run.strategy.replicas.front();
  MeasuredStep facts;
  facts.measured_rows = info.full_split.empty() ? info.micro_batch : 0;
  for (const auto& split : info.full_split) facts.measured_rows = std::max(facts.measured_rows, split.rows());
  device::with_resource_errors(
      fmt::format("measuring one step of the model ({}) on {}", config::word(c.model.name), device.str()),
      "Make the model smaller, or lower data.batch_size", [&] {
        plan::StepProbe probe(run.loaded, run.train_set, run.strategy, run.step.amp, info.micro_batch,
                              run.batch.accumulation);
        constexpr int64_t kFew = 2;
        const int64_t available = device.is_cuda() ? -1 : device::host_available_memory(meminfo);
        if (available >= 0 && facts.measured_rows > kFew) {
          plan::StepMemory few = probe.measure(kFew);
          few.activations = few.activations / kFew * facts.measured_rows;
          if (few.total() > available) {
            few.measured_by += fmt::format(
                " of {} samples, scaled (a step of {} would not fit the host's memory, so "
                "it was not run)",
                kFew, facts.measured_rows);
            facts.memory = few;
            return;
          }
        }
        facts.memory = probe.measure(facts.measured_rows);
      });
  return facts;
}

// The memory each device would hold, against what it has free. dp's replicas
// hold weights and gradients but no optimizer state; CPU replicas share the
// host's memory, so they are summed under one entry.
json memory_section(DryRun& dry, const MeasuredStep& facts, const parallel::StrategyPlan& strategy,
                    const std::string& meminfo) {
  struct Need {
    int64_t bytes = 0;
    int64_t replicas = 0;
  };
  std::map<std::string, Need> needs;
  std::map<std::string, torch::Device> devices;
  for (std::size_t i = 0; i < strategy.replicas.size(); ++i) {
    const torch::Device& device = strategy.replicas[i];
    const bool primary = i == 0;
    Need& need = needs[device.str()];
    need.bytes += facts.memory.parameters + facts.memory.gradients + facts.memory.activations +
                  (primary ? facts.memory.optimizer_state : 0);
    ++need.replicas;
    devices.emplace(device.str(), device);
  }
  json out{{"parameter_bytes", facts.memory.parameters},
           {"gradient_bytes", facts.memory.gradients},
           {"optimizer_state_bytes", facts.memory.optimizer_state},
           {"activation_bytes", facts.memory.activations},
           {"activations_measured",
            fmt::format("on {} by {}", count_of(facts.measured_rows, "sample"), facts.memory.measured_by)}};
  json per_device = json::array();
  for (const auto& [name, need] : needs) {
    const int64_t free = free_bytes(devices.at(name), meminfo);
    per_device.push_back(fmt::format("{}: {} needed{}, {} free", name, bytes_text(need.bytes),
                                     need.replicas > 1 ? fmt::format(" by {} replicas", need.replicas) : "",
                                     bytes_text(free)));
    if (free >= 0 && need.bytes > free) {
      dry.problems.push_back(fmt::format(
          "memory: one step needs about {} on {} (weights, gradients, optimizer state and the activations of {}), "
          "more than its {} free; lower data.batch_size or raise train.accumulation_steps, use train.amp: bf16, "
          "or a smaller model",
          bytes_text(need.bytes), name, count_of(facts.measured_rows, "sample"), bytes_text(free)));
    }
  }
  out["per_device"] = per_device;
  return out;
}

json outputs_section(DryRun& dry, const config::ExperimentConfig& c, bool resume) {
  const fs::path run_dir = config::run_directory(c);
  const fs::path checkpoints = config::checkpoint_directory(c);
  config::collect_refusal(dry.problems, [&] { check_writable(run_dir, "output.dir"); });
  config::collect_refusal(dry.problems, [&] {
    check_writable(checkpoints, "checkpoint.dir");
    if (!resume) checkpoint::check_checkpoint_dir(checkpoints);
  });
  if (const std::string problem = finished_run_problem(run_dir); !resume && !problem.empty()) {
    dry.problems.push_back(problem);
  }
  if (std::string problem = RunDirLock::held_by_another(run_dir); !problem.empty()) {
    dry.problems.push_back(std::move(problem));
  }
  return {{"run_directory", run_dir.string()}, {"checkpoints", checkpoints.string()}};
}

std::string scalar_text(const json& value) { return value.is_string() ? value.get<std::string>() : value.dump(); }

// Objects as "key: value" lines, nested ones indented; arrays as "- item" lines.
void render(std::string& out, const json& value, int indent) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  if (value.is_object()) {
    for (const auto& [key, item] : value.items()) {
      if (item.is_structured() && !item.empty()) {
        out += pad + key + ":\n";
        render(out, item, indent + 2);
      } else {
        out += pad + key + ": " + scalar_text(item) + "\n";
      }
    }
  } else {
    for (const auto& item : value) {
      if (item.is_structured() && !item.empty()) {
        out += pad + "-\n";
        render(out, item, indent + 2);
      } else {
        out += pad + "- " + scalar_text(item) + "\n";
      }
    }
  }
}

}  // namespace

DryRun dry_run(const DryRunRequest& request) {
  DryRun dry;
  json& report = dry.report;
  config::LoadedConfig loaded;
  if (!config::collect_refusal(dry.problems, [&] { loaded = config::load_config(request.config, request.overrides); }))
    return dry;
  report["config"] = {{"file", fmt::format("{}", fmt::join(request.config, " + "))}, {"name", loaded.config.name}};

  plan::RunRequest run_request;
  run_request.inventory = device::probe_devices(request.cuda_visible_devices);
  run_request.launch = request.launch;
  run_request.nproc = request.nproc;
  run_request.meminfo = request.meminfo;
  report["devices"] = visible_devices(run_request.inventory);
  plan::CollectedRun collected = plan::collect_run(std::move(loaded), run_request);
  dry.problems = std::move(collected.problems);
  const plan::RunPlan& run = collected.plan;
  const config::ExperimentConfig& c = run.loaded.config;

  json selected = json::array();
  for (const torch::Device& device : run.devices.devices()) selected.push_back(device.str());
  report["devices"]["selected"] = selected;
  report["devices"]["reason"] = run.devices.reason;
  if (!run.devices.warning.empty()) report["devices"]["warning"] = run.devices.warning;
  report["strategy"] = {
      {"processes", run.processes.reason}, {"kind", strategy_name(run.strategy.kind)}, {"reason", run.strategy.reason}};
  if (!run.worker_strategies.empty()) {
    json ranks = json::array();
    for (std::size_t rank = 0; rank < run.worker_strategies.size(); ++rank) {
      ranks.push_back(fmt::format("rank {}: {}", rank, run.worker_strategies[rank].replicas.front().str()));
    }
    report["strategy"]["ranks"] = ranks;
  }

  const json outputs = outputs_section(dry, c, request.resume);
  if (collected.reached < plan::Reached::kBatch) {
    report["outputs"] = outputs;
    return dry;
  }
  plan::TrainLayout layout;
  layout.strategy = run.strategy;
  layout.world_size = run.launch.world_size;
  layout.train_samples = run.train_set->info().samples;
  layout.batch = run.batch;
  const RunInfo info = describe_run(run_settings(run), layout);
  report["strategy"]["replicas"] = info.replicas;
  report["batch"] = batch_section(c.data, layout.batch, info, run.launch.world_size);
  if (run.batch_choice) {
    report["batch"]["stated_as"] = "data.batch_size: auto";
    report["batch"]["chosen"] = run.batch_choice->describe();
  }

  const data::Dataset& train_set = *run.train_set;
  const int64_t in_memory = data::split_bytes(train_set) + (run.test_set ? data::split_bytes(*run.test_set) : 0);
  const int64_t on_disk = bytes_on_disk(c.data);
  report["data"] = {{"dataset", train_set.info().name},
                    {"source", train_set.info().source},
                    {"train_samples", train_set.info().samples},
                    {"test_samples", run.test_set ? run.test_set->info().samples : 0},
                    {"on_disk", on_disk > 0 ? bytes_text(on_disk) : "generated in memory"},
                    {"in_memory", bytes_text(in_memory)}};

  // What the test records will hold by class: the whole confusion matrix for few classes only.
  if (run.loss.classes > 0) report["evaluation"] = {{"by_class", step::class_record_form(run.loss.classes)}};

  // model.init_from and model.freeze: what will be loaded, skipped and frozen.
  if (const std::vector<std::string> init = run.model_init.describe(); !init.empty()) report["model_init"] = init;

  MeasuredStep facts;
  if (collected.reached == plan::Reached::kComplete &&
      config::collect_refusal(dry.problems, [&] { facts = measure_step(run, info, request.meminfo); })) {
    json fast = run.step.fast.decisions;
    const data::DeviceCacheChoices& cache = run.device_cache;
    fast.push_back(fmt::format("data.device_cache: {} ({})", cache.train.on ? "on" : "off", cache.train.why));
    if (run.test_set) {
      fast.push_back(
          fmt::format("data.device_cache for the test split: {} ({})", cache.test.on ? "on" : "off", cache.test.why));
    }
    // Shown where a split's files are decoded per batch, as the run logs it, once decided (a refused
    // data.decode: gpu is among the problems instead).
    const auto per_batch = [](const data::Dataset* set, const data::DecodeChoice& choice) {
      return set != nullptr && set->info().samples > 0 && set->sample_file(0) != nullptr && !choice.why.empty();
    };
    const data::DecodeChoices& decode = run.decode;
    if (per_batch(run.train_set.get(), decode.train)) {
      fast.push_back(fmt::format("data.decode: {} ({})", decode.train.gpu ? "gpu" : "cpu", decode.train.why));
    }
    if (per_batch(run.test_set.get(), decode.test)) {
      fast.push_back(
          fmt::format("data.decode for the test split: {} ({})", decode.test.gpu ? "gpu" : "cpu", decode.test.why));
    }
    report["fast_paths"] = fast;
    report["memory"] = memory_section(dry, facts, run.strategy, request.meminfo);
  }
  report["outputs"] = outputs;
  return dry;
}

std::string format_dry_run(const DryRun& dry) {
  std::string out;
  render(out, dry.report, 0);
  if (dry.problems.empty()) {
    out += "no problems: train would start\n";
  } else {
    out += fmt::format("{} that would stop train:\n", count_of(static_cast<int64_t>(dry.problems.size()), "problem"));
    for (const auto& problem : dry.problems) out += "  - " + problem + "\n";
  }
  return out;
}

}  // namespace gputrain::report
