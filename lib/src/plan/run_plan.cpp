#include "gputrain/plan/run_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <iterator>

#include "gputrain/checkpoint/weights.h"
#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"
#include "gputrain/config/config_errors.h"
#include "gputrain/config/load.h"
#include "gputrain/data/description.h"
#include "gputrain/device/cpu_share.h"
#include "gputrain/device/host_resources.h"
#include "gputrain/device/memory.h"
#include "gputrain/models/factory.h"
#include "gputrain/models/freeze.h"
#include "gputrain/models/whiten.h"
#include "gputrain/optim/optimizer.h"
#include "gputrain/parallel/launcher.h"
#include "gputrain/parallel/split.h"
#include "gputrain/plan/data_keys.h"
#include "gputrain/plan/decode_plan.h"
#include "gputrain/step/amp.h"
#include "problems.h"

namespace gputrain::plan {

namespace {

parallel::StrategyKeys strategy_keys(const config::ExperimentConfig& c) {
  return {c.strategy, c.dp, c.ddp, c.train.log_replicas};
}

// A checkpoint that stopped inside an epoch continues its epoch's batches, so
// the batch must come to what it did: a batch stated by data.micro_batch_size
// changes with the processes.
void check_same_batch_mid_epoch(const config::LoadedConfig& loaded, const checkpoint::ResolvedBatch& resumed,
                                const checkpoint::ResolvedBatch& now) {
  if (resumed.global == now.global && resumed.accumulation == now.accumulation) return;
  throw ConfigError(loaded.sources.at("data.batch_size"), "data.batch_size",
                    fmt::format("comes to {} per optimizer step ({}) here, but the checkpoint stopped inside an "
                                "epoch of {} ({}); resume with the same batch and processes, or from a checkpoint "
                                "at an epoch's end",
                                now.global, count_of(now.accumulation, "accumulation step"), resumed.global,
                                count_of(resumed.accumulation, "accumulation step")));
}

// The model, built once on the CPU for its facts and to match model.init_from
// and model.freeze against its names; the run builds its own on its device.
// The model sees one sample shape. With augment.random_resized_crop the
// training images are sized apart from the test split's (data.resize and
// data.center_crop size those), so the two can differ: the first test batch
// then stopped the run inside LibTorch ("mat1 and mat2 shapes cannot be multiplied").
void check_test_shape(const config::LoadedConfig& loaded, const data::DatasetInfo& train,
                      const data::DatasetInfo& test) {
  if (test.input_shape == train.input_shape) return;
  const config::DataConfig& d = loaded.config.data;
  if (d.center_crop.empty() && d.resize == 0) {
    throw DataError(fmt::format("the test split {} {}", test.source, data::description_mismatch(train, test)));
  }
  const std::string key = d.center_crop.empty() ? "data.resize" : "data.center_crop";
  throw ConfigError(
      loaded.sources.at(key), key,
      fmt::format("gives the test split {} images, but the training split's are {} (data.augment.random_resized_crop "
                  "sizes them), and the model sees one shape: set data.center_crop: [{}, {}] so that the test images "
                  "are cut to the training size, as torchvision's Resize then CenterCrop do",
                  fmt::join(test.input_shape, "x"), fmt::join(train.input_shape, "x"), train.input_shape.at(1),
                  train.input_shape.at(2)));
}

// optim.muon.lr trains the 4-D convolution weights that train: on a model with
// none (an MLP, or every convolution frozen) it did nothing, and plan and the
// run said "no problems".
void check_muon_weights(const config::LoadedConfig& loaded, const torch::nn::Module& model) {
  const config::OptimConfig& optim = loaded.config.optim;
  if (optim.muon.lr <= 0) return;
  const std::vector<optim::ParamGroup> groups = optim::param_groups(optim, model.named_parameters());
  if (std::any_of(groups.begin(), groups.end(), [](const optim::ParamGroup& g) { return g.muon; })) return;
  throw ConfigError(loaded.sources.at("optim.muon.lr"), "optim.muon.lr",
                    "Muon trains 4-D convolution weights, and this model has none that train (no conv2d layer, or "
                    "model.freeze holds them all), so it would do nothing: set optim.muon.lr: 0, or train a "
                    "conv2d layer");
}

void plan_model(RunPlan& run) {
  const config::ExperimentConfig& c = run.loaded.config;
  const data::DatasetInfo& info = run.train_set->info();
  device::with_resource_errors(
      fmt::format("building the model ({}) on the CPU to trace it", config::word(c.model.name)), models::kSmallerModel,
      [&] {
        models::check_whitening_data(c.model, info);
        torch::nn::Sequential model = models::build_model(c.model, info, torch::kCPU);
        run.model = model_facts(model, info.input_shape);
        run.model_init = resolve_model_init(run.loaded, *model);
        models::freeze(*model, c.model.freeze);  // a frozen batchnorm may stay in eval mode
        check_muon_weights(run.loaded, *model);
        models::train_mode(*model, c.model.freeze_batchnorm);
        run.model.single_value_batchnorm = models::batchnorm_of_single_values(model, info.input_shape);
      });
}

// Those who share each micro-batch: ddp's ranks, or dp's replicas (1 alone).
int64_t batch_sharers(const RunPlan& run) {
  return run.strategy.kind == parallel::StrategyKind::kDistributed
             ? run.launch.world_size
             : std::max<int64_t>(1, static_cast<int64_t>(run.strategy.replicas.size()));
}

// The rows a forward pass of `rows` gives each of those who share it, as split_batch shares it.
std::vector<int64_t> shares(const RunPlan& run, int64_t rows) {
  const std::vector<std::string> sharers(static_cast<std::size_t>(batch_sharers(run)));
  std::vector<int64_t> out;
  for (const parallel::ReplicaSplit& split : parallel::split_batch(rows, sharers)) out.push_back(split.rows());
  return out;
}

int64_t smallest_share(const RunPlan& run, int64_t rows) {
  const std::vector<int64_t> all = shares(run, rows);
  return *std::min_element(all.begin(), all.end());
}

// model.sync_batchnorm sums the batch statistics across ddp's ranks; dp's
// replicas each see their part of a batch, and nothing sums theirs.
void check_sync_batchnorm(const RunPlan& run) {
  if (!run.loaded.config.model.sync_batchnorm || run.strategy.kind != parallel::StrategyKind::kDataParallel) return;
  throw ConfigError(run.loaded.sources.at("model.sync_batchnorm"), "model.sync_batchnorm",
                    "works under ddp, not dp (whose replicas each see their part of a batch): launch ranks "
                    "with --nproc N, or leave it off");
}

// A training forward pass of one sample through a batchnorm layer that
// normalises one value per channel has no batch statistics: LibTorch stops
// the run there, at the end of the first epoch for a last batch of 1.
// Refused up front, by train and `gputrain plan` alike.
void check_batchnorm_rows(const RunPlan& run) {
  const std::string& layer = run.model.single_value_batchnorm;
  const BatchPlan& batch = run.batch;
  const bool every_batch = smallest_share(run, batch.micro) == 1;
  if (layer.empty() || (!every_batch && smallest_share(run, batch.last_micro) > 1)) return;
  const std::string sharers =
      count_of(batch_sharers(run), run.strategy.kind == parallel::StrategyKind::kDistributed ? "rank" : "dp replica");
  std::string why;
  if (every_batch) {
    why = batch.micro == 1 ? "every training forward pass gets 1 sample"
                           : fmt::format("batches of {} shared by {} give one of them 1 sample", batch.micro, sharers);
  } else {
    why = batch.last_micro == 1 ? fmt::format("{} training samples in batches of {} leave a last batch of 1 sample",
                                              run.train_set->info().samples, batch.micro)
                                : fmt::format("the last batch, of {}, shared by {} gives one of them 1 sample",
                                              batch.last_micro, sharers);
  }
  const std::string fix = every_batch ? "set a data.batch_size that gives every forward pass at least 2 samples"
                                      : "set data.drop_last: true (the short last batch is left out of each "
                                        "epoch), or a data.batch_size that leaves no batch of 1";
  throw ConfigError(run.loaded.sources.at("data.batch_size"), "data.batch_size",
                    fmt::format("{}, but batchnorm layer '{}' normalises one value per channel of each sample (as "
                                "after a linear layer), and the statistics of a batch of 1 are undefined (LibTorch "
                                "stops the run: \"Expected more than 1 value per channel when training\"); {}",
                                why, layer, fix));
}

// data.device_cache for both splits, with the memory free on the device now.
void plan_device_cache(RunPlan& run) {
  const config::Switch setting = run.loaded.config.data.device_cache;
  const torch::Device device = run.strategy.replicas.front();
  const int64_t free_bytes = setting != config::Switch::kOff && device.is_cuda() ? device::free_memory(device) : -1;
  run.device_cache = data::choose_device_caches(setting, *run.train_set, run.test_set.get(), free_bytes, device);
}

// data.decode for both splits on the strategy's first device.
void plan_decode(RunPlan& run) {
  const torch::Device device = run.strategy.replicas.front();
  run.decode.train = decide_decode(run.loaded, *run.train_set, device, data::nvjpeg_missing);
  if (run.test_set) run.decode.test = decide_decode(run.loaded, *run.test_set, device, data::nvjpeg_missing);
}

// data.decode_threads for the splits the host loader decodes or augments
// image by image; auto: the CPUs this process may use. Nothing when no split does.
void plan_decode_threads(RunPlan& run) {
  const auto per_image = [](const data::Dataset* set, const data::DeviceCacheChoice& cache,
                            const data::DecodeChoice& decode, const data::ImagePipeline& images) {
    return set != nullptr && !cache.on && !decode.gpu && data::works_per_image(*set, images);
  };
  if (!per_image(run.train_set.get(), run.device_cache.train, run.decode.train, run.train_loader) &&
      !per_image(run.test_set.get(), run.device_cache.test, run.decode.test, run.test_loader)) {
    return;
  }
  const int64_t threads = decode_threads(run.loaded.config.data);
  spdlog::info("data.decode_threads: {} ({})", threads,
               run.loaded.config.data.decode_threads > 0 ? "set" : "auto: the CPUs this process may use");
  run.train_loader.decode_threads = threads;
  run.test_loader.decode_threads = threads;
}

// On CUDA, where the kernels LibTorch and CUDA compile at run time are kept
// for the next run; a warning, with the fix, for each cache that is not.
void log_kernel_caches(const RunPlan& run, const std::optional<device::KernelCacheEnv>& env) {
  if (!env || !run.strategy.replicas.front().is_cuda()) return;
  const std::vector<device::KernelCache> caches = device::kernel_caches(*env);
  if (const std::string kept = device::describe_kept(caches); !kept.empty()) spdlog::info("{}", kept);
  for (const device::KernelCache& cache : caches) {
    if (!cache.not_kept.empty()) {
      spdlog::warn("kernel cache: {} are compiled again in every run: {}", cache.name, cache.not_kept);
    }
  }
}

// How each step runs, for the model the plan traced.
void plan_steps(RunPlan& run) {
  const config::ExperimentConfig& c = run.loaded.config;
  StepPlan& step = run.step;
  step.grad_clip = c.train.grad_clip;
  step.on_nan = c.train.on_nan;
  step.zero_grad_in_place = run.strategy.kind == parallel::StrategyKind::kDistributed && c.ddp.gradient_as_bucket_view;
  RunFacts facts = run_facts(run.model, run.strategy, run.batch.micro, run.batch.accumulation, step.amp);
  facts.cpus = device::read_cpu_share();
  step.fast = plan_fast_paths(c, facts);
  run.optim = resolved_optim(c.optim, step.fast);
}

// Everything after the devices; `run` holds the config and the devices.
Reached resolve_on_devices(RunPlan& run, const RunRequest& request, Problems& problems) {
  run.processes = parallel::ProcessPlan{0, "one process"};
  if (request.purpose != Purpose::kBench) {
    problems.attempt([&] {
      run.processes = parallel::plan_processes(run.loaded.config.strategy, run.devices, request.launch, request.nproc);
    });
  }
  run.launch = request.launch;
  const int64_t workers = run.processes.workers;
  if (workers > 0) {  // what each worker will resolve for itself; this process stands for rank 0
    run.launch.rank = 0;
    run.launch.local_rank = 0;
    run.launch.world_size = workers;
  }
  std::optional<checkpoint::ResolvedBatch> stated;
  const bool batch_form_known = problems.attempt([&] { stated = stated_batch(run.loaded, run.launch.world_size); });
  run.strategy.replicas = {run.devices.primary()};  // single, should the strategy be refused
  const bool strategy_known = problems.attempt([&] {
    if (workers > 0) {
      run.worker_strategies = parallel::check_local_workers(strategy_keys(run.loaded.config), run.devices, workers);
      run.strategy = run.worker_strategies.front();
    } else {
      run.strategy = parallel::plan_strategy(strategy_keys(run.loaded.config), run.devices, run.launch);
    }
  });
  // A refused train.amp is said once; the batch is then measured without it.
  const config::ExperimentConfig& c = run.loaded.config;
  run.step.amp = c.train.amp;
  if (!problems.attempt([&] {
        step::check_amp_device(c.train.amp, run.devices.primary().type(), run.loaded.sources.at("train.amp"));
      })) {
    run.step.amp = config::AmpMode::kOff;
  }
  if (strategy_known) problems.attempt([&] { check_sync_batchnorm(run); });
  const Reached after_strategy = strategy_known ? Reached::kStrategy : Reached::kDevices;
  // A process that only starts workers reads the data only for data.batch_size: auto's measurement.
  const bool launcher_only = workers > 0 && !problems.collecting();
  if (launcher_only && (stated || request.resolved_batch)) return after_strategy;

  if (!problems.attempt([&] { run.train_set = data::make_dataset(c.data, data::Split::kTrain, c.seed); })) {
    return after_strategy;
  }
  const data::DatasetInfo& info = run.train_set->info();
  run.trained = info;
  run.trained_from = "the training split";
  const bool labeled = info.target_kind != data::TargetKind::kNone;
  if (request.purpose == Purpose::kBench && !labeled) {
    throw UserError(fmt::format("data set '{}' has no labels, so there is no train step to time", info.name));
  }
  if (!launcher_only && labeled) {
    problems.attempt([&] {
      run.test_set = data::make_dataset(c.data, data::Split::kTest, c.seed);
      check_test_shape(run.loaded, info, run.test_set->info());
    });
  }
  // The keys that must suit the data, before anything is built.
  const bool loss_known = problems.attempt([&] {
    const torch::Device device = run.strategy.replicas.front();
    if (!labeled) {
      class_weights(run.loaded, info, device);  // refuses weights for a data set without classes
      return;
    }
    run.loss = build_loss(run.loaded, info, device);
    check_evaluation_keys(run.loaded, info);
  });
  run.evaluation = plan_evaluation(c.train, run.loss.classes > 0);
  const bool model_known = problems.attempt([&] { plan_model(run); });
  if (!strategy_known) return after_strategy;
  if (!batch_form_known) return Reached::kData;
  std::optional<checkpoint::ResolvedBatch> sizes = stated ? stated : request.resolved_batch;
  if (!stated && sizes) {
    spdlog::info("data.batch_size: {} in {} (auto, as {} resolved it)", sizes->global,
                 count_of(sizes->accumulation, "accumulation step"), request.resolved_by);
  }
  if (!sizes && !problems.attempt([&] {
        run.batch_choice = solve_batch(run.loaded, run.model_init, run.train_set, run.strategy, run.step.amp,
                                       run.launch.world_size, request.meminfo);
      })) {
    return Reached::kData;
  }
  if (run.batch_choice) {
    spdlog::info("data.batch_size: {} (auto: {})", run.batch_choice->batch_size, run.batch_choice->describe());
    // Evaluation in the micro-batches known to fit, not the whole target.
    sizes = checkpoint::ResolvedBatch{run.batch_choice->batch_size, run.batch_choice->accumulation,
                                      evaluation_batch(c, run.launch.world_size, run.batch_choice->micro_batch)};
  }
  if (request.resolved_batch && request.resumed_mid_epoch &&
      !problems.attempt([&] { check_same_batch_mid_epoch(run.loaded, *request.resolved_batch, *sizes); })) {
    return Reached::kData;
  }
  run.batch = plan_batches(*sizes, c.data.drop_last, info.samples);
  run.batch.stated_at = run.loaded.sources.at("data.batch_size");
  run.train_loader = data::loader_options(c.data, data::Split::kTrain, run.batch.micro, c.seed);
  run.test_loader = data::loader_options(c.data, data::Split::kTest, run.batch.test, c.seed);
  if (!launcher_only) {
    problems.attempt([&] { plan_device_cache(run); });
    problems.attempt([&] { plan_decode(run); });
    plan_decode_threads(run);
    log_kernel_caches(run, request.kernel_cache_env);
  }
  if (!model_known || !loss_known) return Reached::kBatch;
  plan_steps(run);
  // A step that cannot run is not measured either.
  if (!problems.attempt([&] { check_batchnorm_rows(run); })) return Reached::kBatch;
  return Reached::kComplete;
}

// What saved weights (or the configured model) were trained on: the
// description their file carries (true), else the training split described (not decoded).
bool describe_trained(RunPlan& run, const std::string& weights) {
  const config::ExperimentConfig& c = run.loaded.config;
  const std::string stored = weights.empty() ? "" : checkpoint::stored_training_data(weights);
  if (!stored.empty()) {
    run.trained = data::read_model_description(stored, weights);
    run.trained_from = fmt::format("as {} describes it", weights);
    return true;
  }
  run.trained = data::make_dataset(data::for_description(c.data), data::Split::kTrain, c.seed)->info();
  run.trained_from = fmt::format("from the data set ({})", run.trained.source);
  return false;
}

// test, predict, export and describe: no training run, only the device, what
// the model was trained on, the test split (test) and how samples are scored.
void resolve_saved_model(RunPlan& run, const RunRequest& request) {
  const config::ExperimentConfig& c = run.loaded.config;
  const Purpose purpose = request.purpose;
  const bool on_cpu = purpose == Purpose::kExport || purpose == Purpose::kDescribe;
  if (!on_cpu) {
    Problems(nullptr, run.loaded.sources).attempt([&] {
      run.devices = device::resolve_devices(c.device, c.gpus, request.inventory);
    });
  }
  const bool described = describe_trained(run, request.weights);
  if (purpose == Purpose::kDescribe) return;
  spdlog::info("the model's training data: {}, {}", data::description_summary(run.trained), run.trained_from);
  const bool labeled = run.trained.target_kind != data::TargetKind::kNone;
  if (!labeled && (purpose == Purpose::kEvaluate || purpose == Purpose::kPredict)) {
    throw UserError(
        purpose == Purpose::kEvaluate
            ? fmt::format("data set '{}' has no labels, so there is nothing to test", run.trained.name)
            : fmt::format("data set '{}' has no labels: its model predicts nothing to report", run.trained.name));
  }
  if (purpose == Purpose::kEvaluate) {
    run.test_set = data::make_dataset(c.data, data::Split::kTest, c.seed, described ? &run.trained : nullptr);
    const data::DatasetInfo& info = run.test_set->info();
    if (const std::string mismatch = data::description_mismatch(run.trained, info); !mismatch.empty()) {
      throw DataError(fmt::format("the test split {} {} ({}); test the model on data like its training data",
                                  info.source, mismatch, run.trained_from));
    }
    check_evaluation_keys(run.loaded, info);
    step::check_amp_device(c.train.amp, run.devices.primary().type(), run.loaded.sources.at("train.amp"));
    run.step.amp = c.train.amp;
    run.loss = build_loss(run.loaded, run.trained, run.devices.primary());
  } else if (purpose == Purpose::kPredict) {
    check_evaluation_keys(run.loaded, run.trained);  // train.tta's views must fit the model's images
  }
  run.test_loader = data::loader_options(c.data, data::Split::kTest, evaluation_batch(c, 1), c.seed);
  run.test_loader.decode_threads = decode_threads(c.data);
  run.evaluation = plan_evaluation(c.train, run.trained.target_kind == data::TargetKind::kClasses);
  if (!request.run_views && purpose != Purpose::kExport) run.evaluation.tta = config::TtaConfig{};
}

// The devices, then everything after them, then where a training run writes
// (rank 0's, which writes; a launcher's for it); `run` holds the config.
Reached resolve(RunPlan& run, const RunRequest& request, Problems& problems) {
  // Collecting, the CPU stands in should `device:` or `gpus:` be refused.
  problems.attempt([&] {
    run.devices = device::resolve_devices(run.loaded.config.device, run.loaded.config.gpus, request.inventory);
  });
  const Reached reached = resolve_on_devices(run, request, problems);
  run.outputs = plan_outputs(run.loaded.config);
  if (request.purpose == Purpose::kTrain && run.launch.rank == 0) {
    problems.found(output_problems(run.outputs, request.resuming));
  }
  return reached;
}

// Bytes a device has free for the run: the driver's count on CUDA, the host's
// available memory elsewhere (shared by every replica there).
int64_t free_bytes(const torch::Device& device, const std::string& meminfo) {
  return device.is_cuda() ? device::free_memory(device) : device::host_available_memory(meminfo);
}

// One measured step on the largest share of a micro-batch any device gets, and
// what each device would hold: dp's replicas hold weights and gradients but no
// optimizer state; CPU replicas share the host's memory, so they are summed under one entry.
// On the CPU a step larger than the host's memory is no error but the kernel
// ending the process (plan itself, exit 137, on 3000 x 3000 images): a step of
// 2 samples, scaled to the share, is judged first, and the share's step runs only if that fits.
MemoryPlan plan_memory(const RunPlan& run, const std::string& meminfo) {
  MemoryPlan memory;
  const std::vector<int64_t> micro_shares = shares(run, run.batch.micro);
  memory.measured_rows = *std::max_element(micro_shares.begin(), micro_shares.end());
  const torch::Device device = run.strategy.replicas.front();
  device::with_resource_errors(fmt::format("measuring one step of the model ({}) on {}",
                                           config::word(run.loaded.config.model.name), device.str()),
                               "Make the model smaller, or lower data.batch_size", [&] {
                                 StepProbe probe(run.loaded, run.model_init, run.train_set, run.strategy, run.step.amp,
                                                 run.batch.micro, run.batch.accumulation);
                                 constexpr int64_t kFew = 2;
                                 const int64_t available =
                                     device.is_cuda() ? -1 : device::host_available_memory(meminfo);
                                 if (available >= 0 && memory.measured_rows > kFew) {
                                   StepMemory few = probe.measure(kFew);
                                   few.activations = few.activations / kFew * memory.measured_rows;
                                   if (few.total() > available) {
                                     few.measured_by += fmt::format(
                                         " of {} samples, scaled (a step of {} would not fit the host's memory, so "
                                         "it was not run)",
                                         kFew, memory.measured_rows);
                                     memory.step = few;
                                     return;
                                   }
                                 }
                                 memory.step = probe.measure(memory.measured_rows);
                               });
  const StepMemory& step = memory.step;
  for (std::size_t i = 0; i < run.strategy.replicas.size(); ++i) {
    const torch::Device& replica = run.strategy.replicas[i];
    auto at = std::find_if(memory.devices.begin(), memory.devices.end(),
                           [&](const DeviceMemory& d) { return d.device == replica.str(); });
    if (at == memory.devices.end()) {
      memory.devices.push_back({replica.str(), 0, 0, free_bytes(replica, meminfo)});
      at = std::prev(memory.devices.end());
    }
    at->needed += step.parameters + step.gradients + step.activations + (i == 0 ? step.optimizer_state : 0);
    ++at->replicas;
  }
  std::sort(memory.devices.begin(), memory.devices.end(),
            [](const DeviceMemory& a, const DeviceMemory& b) { return a.device < b.device; });
  return memory;
}

std::vector<std::string> memory_problems(const MemoryPlan& memory) {
  std::vector<std::string> problems;
  for (const DeviceMemory& d : memory.devices) {
    if (d.free < 0 || d.needed <= d.free) continue;
    problems.push_back(fmt::format(
        "memory: one step needs about {} on {} (weights, gradients, optimizer state and the activations of {}), "
        "more than its {} free; lower data.batch_size or raise train.accumulation_steps, use train.amp: bf16, "
        "or a smaller model",
        bytes_text(d.needed), d.device, count_of(memory.measured_rows, "sample"), bytes_text(d.free)));
  }
  return problems;
}

// The training data's bytes on disk: a file (an .npz) or a directory's files; 0 for generated data.
int64_t bytes_on_disk(const config::DataConfig& data) {
  namespace fs = std::filesystem;
  if (data.dataset == config::DatasetName::kRandom || data.dataset == config::DatasetName::kSynthetic) return 0;
  std::error_code error;
  if (fs::is_regular_file(data.root, error)) return static_cast<int64_t>(fs::file_size(data.root, error));
  int64_t bytes = 0;
  for (fs::recursive_directory_iterator it(data.root, error), end; !error && it != end; it.increment(error)) {
    if (it->is_regular_file(error)) bytes += static_cast<int64_t>(it->file_size(error));
  }
  return bytes;
}

// `run` takes the config, and the pieces of it its readers take instead of the whole.
void take_config(RunPlan& run, config::LoadedConfig loaded) {
  run.loaded = std::move(loaded);
  const config::ExperimentConfig& c = run.loaded.config;
  run.name = c.name;
  run.seed = c.seed;
  run.network = c.model;
  run.data = c.data;
  run.loop = {c.train.epochs,  c.train.log_every, c.train.on_sigint,
              c.train.profile, c.checkpoint,      config::dump_config(c)};
}

}  // namespace

bool uses_saved_model(Purpose purpose) {
  switch (purpose) {
    case Purpose::kTrain:
    case Purpose::kBench:
      return false;
    case Purpose::kEvaluate:
    case Purpose::kPredict:
    case Purpose::kExport:
    case Purpose::kDescribe:
      return true;
  }
  return false;
}

RunPlan resolve_run(config::LoadedConfig loaded, const RunRequest& request) {
  RunPlan run;
  take_config(run, std::move(loaded));
  if (uses_saved_model(request.purpose)) {
    resolve_saved_model(run, request);
    return run;
  }
  Problems strict(nullptr, run.loaded.sources);
  resolve(run, request, strict);
  return run;
}

RunPlan resolve_run(config::LoadedConfig loaded, const device::DevicePlan& devices, const parallel::LaunchInfo& launch,
                    const std::string& meminfo) {
  RunPlan run;
  run.devices = devices;
  take_config(run, std::move(loaded));
  RunRequest request;
  request.launch = launch;
  request.meminfo = meminfo;
  request.purpose = Purpose::kBench;
  Problems strict(nullptr, run.loaded.sources);
  resolve_on_devices(run, request, strict);
  return run;
}

config::ExperimentConfig config_with_resolved_batch(const RunPlan& run) {
  config::ExperimentConfig config = run.loaded.config;
  config::DataConfig& data = config.data;
  if (data.batch_size || data.micro_batch_size || run.batch.global == 0) return config;  // stated, or not resolved
  data.batch_size = run.batch.global;
  config.train.accumulation_steps = run.batch.accumulation;
  data.test_batch_size = run.batch.test;
  return config;
}

CollectedRun collect_run(config::LoadedConfig loaded, const RunRequest& request) {
  CollectedRun out;
  take_config(out.plan, std::move(loaded));
  Problems problems(&out.problems, out.plan.loaded.sources);
  out.reached = resolve(out.plan, request, problems);
  if (out.reached >= Reached::kBatch) out.data_bytes_on_disk = bytes_on_disk(out.plan.loaded.config.data);
  if (out.reached == Reached::kComplete) {
    problems.attempt([&] { out.memory = plan_memory(out.plan, request.meminfo); });
    if (out.memory) problems.found(memory_problems(*out.memory));
  }
  return out;
}

}  // namespace gputrain::plan
