#include "gputrain/report/dry_run.h"

#include <fmt/format.h>

#include "gputrain/common/strings.h"
#include "gputrain/data/host_loader.h"
#include "gputrain/plan/batch_plan.h"
#include "gputrain/report/run_info.h"
#include "gputrain/step/running_sums.h"

namespace gputrain::report {

namespace {

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

json memory_section(const plan::MemoryPlan& memory) {
  const plan::StepMemory& step = memory.step;
  json out{
      {"parameter_bytes", step.parameters},
      {"gradient_bytes", step.gradients},
      {"optimizer_state_bytes", step.optimizer_state},
      {"activation_bytes", step.activations},
      {"activations_measured", fmt::format("on {} by {}", count_of(memory.measured_rows, "sample"), step.measured_by)}};
  json per_device = json::array();
  for (const plan::DeviceMemory& d : memory.devices) {
    per_device.push_back(fmt::format("{}: {} needed{}, {} free", d.device, bytes_text(d.needed),
                                     d.replicas > 1 ? fmt::format(" by {} replicas", d.replicas) : "",
                                     bytes_text(d.free)));
  }
  out["per_device"] = per_device;
  return out;
}

// Each fast path the plan decided, and data.device_cache and data.decode for each split.
json fast_paths_section(const plan::RunPlan& run) {
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
  return fast;
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

DryRun dry_run(const plan::CollectedStart& start) {
  DryRun dry;
  json& report = dry.report;
  const plan::CollectedRun& collected = start.run;
  dry.problems = collected.problems;
  if (!start.configured) return dry;
  const plan::RunPlan& run = collected.plan;
  report["config"] = {{"file", start.config_from}, {"name", run.name}};
  report["devices"] = visible_devices(start.inventory);

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

  const json outputs{{"run_directory", run.outputs.run_dir.string()},
                     {"checkpoints", run.outputs.checkpoint_dir.string()}};
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
  report["batch"] = batch_section(run.data, layout.batch, info, run.launch.world_size);
  if (run.batch_choice) {
    report["batch"]["stated_as"] = "data.batch_size: auto";
    report["batch"]["chosen"] = run.batch_choice->describe();
  }

  const data::Dataset& train_set = *run.train_set;
  const int64_t in_memory = data::split_bytes(train_set) + (run.test_set ? data::split_bytes(*run.test_set) : 0);
  const int64_t on_disk = collected.data_bytes_on_disk;
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

  if (collected.memory) {
    report["fast_paths"] = fast_paths_section(run);
    report["memory"] = memory_section(*collected.memory);
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
