#include "gputrain/plan/batch_solver.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"
#include "gputrain/device/memory.h"

namespace gputrain::plan {

namespace {

// Bytes of everything but the activations, and of the activations per sample.
struct Estimate {
  int64_t fixed = 0;
  double per_sample = 0;
  int64_t at(int64_t samples) const { return fixed + static_cast<int64_t>(per_sample * static_cast<double>(samples)); }
  void learn(const StepMemory& memory, int64_t samples) {
    fixed = memory.total() - memory.activations;
    per_sample = std::max(per_sample, static_cast<double>(memory.activations) / static_cast<double>(samples));
  }
};

// Whatever the device's allocator refused; the caching allocator gives back
// what it holds, so the next try starts from an empty cache.
std::optional<StepMemory> unless_out_of_memory(const std::function<StepMemory()>& step, const torch::Device& device) {
  try {
    return step();
  } catch (const c10::OutOfMemoryError&) {
    device::release_cached_memory(device);
    return std::nullopt;
  }
}

}  // namespace

std::string BatchChoice::describe() const {
  std::string text =
      fmt::format("micro-batch {} x {} = {} per optimizer step{} (train.target_batch); a step of {} takes {}",
                  micro_batch, count_of(accumulation, "accumulation step"), batch_size,
                  batch_size != micro_batch * accumulation
                      ? fmt::format(" over {}", count_of(batch_size / (micro_batch * accumulation), "process"))
                      : "",
                  micro_batch, bytes_text(step_bytes));
  text += budget >= 0 ? fmt::format(" of the {} budget ({})", bytes_text(budget), budget_source)
                      : fmt::format(" ({})", budget_source);
  if (!refused.empty()) text += "; " + fmt::format("{}", fmt::join(refused, "; "));
  return text;
}

std::vector<int64_t> micro_batch_candidates(int64_t target, int64_t processes) {
  std::vector<int64_t> out;
  if (processes < 1 || target % processes != 0) return out;
  const int64_t per_process = target / processes;
  for (int64_t accumulation = 1; accumulation <= per_process; ++accumulation) {
    if (per_process % accumulation == 0) out.push_back(per_process / accumulation);
  }
  return out;
}

BatchChoice choose_batch(int64_t target, int64_t processes, int64_t budget, const StepMeasure& measure) {
  const std::vector<int64_t> candidates = micro_batch_candidates(target, processes);
  if (candidates.empty()) {
    throw UserError(fmt::format("train.target_batch {} does not split evenly over {}; make it a multiple of {}", target,
                                count_of(processes, "process"), processes));
  }
  BatchChoice choice;
  choice.batch_size = target;
  choice.budget = budget;
  const auto fits = [&](const StepMemory& memory) { return budget < 0 || memory.total() <= budget; };

  const int64_t smallest = candidates.back();
  const std::optional<StepMemory> least = measure(smallest);
  if (!least || !fits(*least)) {
    throw UserError(
        fmt::format("even a micro-batch of {} does not fit: its training step {}; lower train.target_batch's "
                    "per-process share, raise train.max_memory, use train.amp: bf16 or a smaller model",
                    count_of(smallest, "sample"),
                    least ? fmt::format("takes {}, over the {} budget", bytes_text(least->total()), bytes_text(budget))
                          : std::string("ran out of device memory")));
  }
  Estimate estimate;
  estimate.learn(*least, smallest);
  for (const int64_t micro : candidates) {
    std::optional<StepMemory> memory;
    if (micro == smallest) {
      memory = least;
    } else if (budget >= 0 && estimate.at(micro) > budget) {
      choice.refused.push_back(fmt::format("{} would take about {}", micro, bytes_text(estimate.at(micro))));
      continue;
    } else {
      memory = measure(micro);
    }
    if (!memory) {
      choice.refused.push_back(fmt::format("{} ran out of memory", micro));
      continue;
    }
    estimate.learn(*memory, micro);
    if (!fits(*memory)) {
      choice.refused.push_back(fmt::format("{} took {}", micro, bytes_text(memory->total())));
      continue;
    }
    choice.micro_batch = micro;
    choice.accumulation = target / (micro * processes);
    choice.step_bytes = memory->total();
    return choice;
  }
  throw std::logic_error("choose_batch: the smallest candidate fitted but was not chosen");
}

std::optional<BatchChoice> solve_batch(const config::LoadedConfig& loaded, const ModelInitPlan& init,
                                       const std::shared_ptr<const data::Dataset>& train_set,
                                       const parallel::StrategyPlan& strategy, config::AmpMode amp, int64_t processes,
                                       const std::string& meminfo) {
  const config::ExperimentConfig& c = loaded.config;
  if (c.data.batch_size || c.data.micro_batch_size) return std::nullopt;
  const torch::Device device = strategy.replicas.front();
  // dp's replicas on the CPU each hold a model in the one host memory; on GPUs each has its own.
  const int64_t replicas = static_cast<int64_t>(strategy.replicas.size());
  const int64_t sharing_memory = device.is_cuda() ? 1 : replicas;

  int64_t budget = -1;
  std::string budget_source;
  if (c.train.max_memory.bytes) {
    budget = *c.train.max_memory.bytes;
    budget_source = "train.max_memory";
  } else if (!device.is_cuda()) {
    const int64_t available = device::host_available_memory(meminfo);
    if (available < 0) {
      throw ConfigError(loaded.sources.at("train.max_memory"), "train.max_memory",
                        fmt::format("auto cannot read the host's available memory from {}; give the budget, e.g. "
                                    "--set train.max_memory=4GiB",
                                    meminfo));
    }
    budget = available / 2 / processes;
    budget_source = fmt::format("train.max_memory auto: half the host's {} available{}", bytes_text(available),
                                processes > 1 ? fmt::format(", over {}", count_of(processes, "process")) : "");
  } else {
    budget = device::free_memory(device);  // a step that still runs out of memory backs off
    budget_source = fmt::format("train.max_memory auto: {}'s free memory", device.str());
  }

  const int64_t per_process = c.train.target_batch / std::max<int64_t>(1, processes);
  StepProbe probe(loaded, init, train_set, strategy, amp, per_process, /*accumulation=*/1);
  const StepMeasure measure = [&](int64_t micro) {
    const int64_t share = (micro + replicas - 1) / replicas;
    return unless_out_of_memory(
        [&] {
          StepMemory memory = probe.measure(share);
          memory.parameters *= sharing_memory;
          memory.gradients *= sharing_memory;
          memory.activations *= sharing_memory;
          return memory;
        },
        device);
  };
  BatchChoice choice;
  try {
    choice = choose_batch(c.train.target_batch, processes, budget, measure);
  } catch (const UserError& e) {
    throw ConfigError(loaded.sources.at("data.batch_size"), "data.batch_size", e.what());
  }
  choice.budget_source = budget_source;

  return choice;
}

}  // namespace gputrain::plan
