#include "gputrain/train/builder.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>

#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"
#include "gputrain/device/host_resources.h"
#include "gputrain/device/memory.h"
#include "gputrain/models/factory.h"
#include "gputrain/optim/optimizer.h"
#include "gputrain/optim/schedule.h"
#include "gputrain/plan/trainable.h"
#include "gputrain/step/backends.h"
#include "gputrain/step/cuda_graph.h"

namespace gputrain::train {

namespace {

// model.sync_batchnorm: under ddp the batchnorm layers sum their batch
// statistics across the ranks (the plan refused it under dp).
void share_batch_statistics(const config::ModelConfig& network, RunParts& run) {
  if (!network.sync_batchnorm) return;
  switch (run.strategy_plan.kind) {
    case parallel::StrategyKind::kDataParallel:
      GPUTRAIN_CHECK(false, "model.sync_batchnorm under dp reached the builder");
    case parallel::StrategyKind::kSingle:
      spdlog::info("model.sync_batchnorm: one process, whose batches are whole: nothing to share");
      return;
    case parallel::StrategyKind::kDistributed: {
      parallel::Strategy* strategy = run.strategy.get();
      const int64_t layers = models::share_batch_statistics(
          run.model, [strategy](torch::Tensor& values) { strategy->sum_across_processes(values); });
      spdlog::info("model.sync_batchnorm: {} normalise with the global batch's statistics",
                   count_of(layers, "batchnorm layer"));
      return;
    }
  }
}

// Every rank must step through the same batches: under torchrun,
// data.batch_size: auto measured each rank's own device, and a rank's --set
// can differ. A sum and a sum of squares equal n x and n x^2 only when all agree.
void check_ranks_agree_on_batch(const plan::RunPlan& plan, parallel::Strategy& strategy) {
  const parallel::LaunchInfo& launch = plan.launch;
  if (launch.world_size < 2) return;
  const plan::BatchPlan& batch = plan.batch;
  const std::vector<double> own{static_cast<double>(batch.global), static_cast<double>(batch.accumulation),
                                static_cast<double>(batch.test)};
  std::vector<double> moments;
  for (const double value : own) moments.insert(moments.end(), {value, value * value});
  torch::Tensor sums = torch::tensor(moments, torch::kFloat64).to(strategy.device());
  strategy.all_reduce_sum(sums);
  sums = sums.cpu();
  const auto n = static_cast<double>(launch.world_size);
  for (std::size_t i = 0; i < own.size(); ++i) {
    const auto index = static_cast<int64_t>(2 * i);
    if (sums[index].item<double>() == n * own[i] && sums[index + 1].item<double>() == n * own[i] * own[i]) continue;
    throw ConfigError(
        batch.stated_at, "data.batch_size",
        fmt::format("the ranks run different batches; rank {} has data.batch_size {}, train.accumulation_steps {}, "
                    "data.test_batch_size {}. Give every rank the same values (data.batch_size: auto measures each "
                    "rank's own device under torchrun; `train --nproc` chooses once for all its workers)",
                    launch.rank, batch.global, batch.accumulation, batch.test));
  }
}

// train.on_nan on the device wherever a multi-tensor optimizer can skip the
// update itself (under ddp the ranks agree on the flag on the stream);
// fp16's scaler skips non-finite steps on its own.
std::unique_ptr<step::NonFiniteSteps> build_non_finite(const plan::StepPlan& plan, RunParts& run) {
  if (run.scaler->enabled()) return nullptr;
  auto check = std::make_unique<step::NonFiniteSteps>(run.device, plan.on_nan == config::OnNan::kSkip);
  if (!optim::skip_updates_when(*run.optimizer, check->found())) return nullptr;
  return check;
}

// The eager step, or the CUDA graph where the fast paths chose it.
std::unique_ptr<step::OptimizerStep> build_step(const RunParts& run) {
  const step::StepParts parts = step_parts(run);
  if (run.step.fast.cuda_graph) return step::make_graphed_step(parts, run.batch.micro, run.batch.accumulation);
  return step::make_eager_step(parts);
}

void log_run(const plan::RunPlan& plan, const RunParts& run, const std::vector<optim::ParamGroup>& groups) {
  const config::OptimConfig& optim = plan.optim;
  const data::DatasetInfo& info = run.train_set->info();
  spdlog::info("data: {} from {}: {} training samples{}, input {}, {}", info.name, info.source, info.samples,
               run.test_set ? fmt::format(", {} test samples", run.test_set->info().samples) : "",
               fmt::join(info.input_shape, "x"),
               run.classification()                            ? fmt::format("{} classes", info.classes)
               : info.target_kind == data::TargetKind::kValues ? "a regression on " + count_of(info.targets, "target")
                                                               : "no labels");
  if (run.classification() && info.classes == 1) {
    spdlog::warn(
        "data: every label of {} is class 0, so any model is 100% accurate; check the targets (for regression "
        "values, store them as floats)",
        info.source);
  }
  // Both forms, whichever the config stated (data.batch_size or data.micro_batch_size).
  spdlog::info("batch: {} per optimizer step = micro-batch {} x {}{}; {} per epoch",
               count_of(run.batch.global, "sample"), run.batch.micro,
               count_of(run.batch.accumulation, "accumulation step"),
               run.world_size > 1 ? fmt::format(" (each of {} ranks takes its share)", run.world_size) : "",
               count_of(run.batch.steps_per_epoch, "step"));
  spdlog::info("model: {}, {} parameters", config::word(plan.network.name), plan.model.parameters);
  for (const auto& line : models::layer_summary(run.model)) spdlog::info("  {}", line);
  spdlog::info("precision: {}{}{}",
               run.step.amp == config::AmpMode::kOff ? "fp32" : "autocast " + std::string(config::word(run.step.amp)),
               run.scaler->enabled() ? fmt::format(", gradient scaler from {}", run.scaler->scale()) : "",
               plan.step.grad_clip > 0 ? fmt::format(", gradients clipped to norm {}", plan.step.grad_clip) : "");
  spdlog::info("hardware efficiency: {}", run.efficiency.describe());
  spdlog::info("optimizer: {} lr {} (scheduler {}), loss {}", config::word(optim.name), optim.lr,
               config::word(optim.scheduler),
               !run.labeled()                                    ? "none (forward passes only)"
               : run.loss.kind == optim::LossKind::kCrossEntropy ? "cross_entropy"
                                                                 : "mse");
  if (optim.no_decay_bias_norm || optim.bias_lr_multiplier != 1 || optim.muon.lr > 0 || groups.size() > 1)
    spdlog::info("optim: {}", optim::describe(groups));
  if (optim.lookahead.k > 0) {
    spdlog::info(
        "optim.lookahead: every {} optimizer steps the slow weights move {} of the way to the weights, "
        "which restart from them",
        optim.lookahead.k, optim.lookahead.alpha);
  }
}

}  // namespace

void apply_fast_paths(const plan::FastPaths& fast) {
  for (const std::string& line : fast.decisions) spdlog::info("{}", line);
  step::configure_backends(fast.matmul_precision.value, fast.threads, fast.cudnn_benchmark);
  spdlog::info("train.matmul_precision: {} ({})", fast.matmul_precision.value, fast.matmul_precision.reason);
}

step::StepParts step_parts(const RunParts& run) {
  step::StepParts parts;
  parts.strategy = run.strategy.get();
  parts.model = run.model;
  parts.optimizer = run.optimizer.get();
  parts.scaler = run.scaler.get();
  parts.loss = run.loss;
  parts.amp = run.step.amp;
  parts.channels_last = run.step.fast.channels_last;
  parts.grad_clip = run.step.grad_clip;
  parts.zero_grad_in_place = run.step.zero_grad_in_place;
  parts.non_finite = run.non_finite.get();
  return parts;
}

RunParts build_run(const plan::RunPlan& plan) {
  const parallel::LaunchInfo& launch = plan.launch;
  RunParts run;
  run.strategy_plan = plan.strategy;
  run.strategy = parallel::make_strategy(run.strategy_plan, launch);
  run.device = run.strategy->device();
  device::set_current_device(run.device);
  spdlog::info("strategy: {} ({})", run.strategy->describe(), run.strategy_plan.reason);
  run.world_size = launch.world_size;
  check_ranks_agree_on_batch(plan, *run.strategy);

  run.step = plan.step;
  run.scaler =
      std::make_unique<step::GradScaler>(step::GradScalerOptions().enabled(run.step.amp == config::AmpMode::kFp16));

  torch::manual_seed(plan.seed);
  run.train_set = plan.train_set;
  run.batch = plan.batch;
  // Each process loads only its rows of every batch (ddp: its rank's share).
  data::LoaderOptions train_options = plan.train_loader;
  train_options.shard = run.strategy->loader_shard();
  run.train_batches =
      data::make_batch_loader(run.train_set, train_options, plan.device_cache.train, plan.decode.train, run.device);
  const int64_t loader_steps =
      (run.train_batches->batches_per_epoch() + run.batch.accumulation - 1) / run.batch.accumulation;
  GPUTRAIN_CHECK(loader_steps == run.batch.steps_per_epoch, "the loader makes {} optimizer steps an epoch, the plan {}",
                 loader_steps, run.batch.steps_per_epoch);
  if (plan.test_set) {
    run.test_set = plan.test_set;
    data::LoaderOptions test_options = plan.test_loader;
    test_options.shard = run.strategy->loader_shard();
    run.test_batches =
        data::make_batch_loader(run.test_set, test_options, plan.device_cache.test, plan.decode.test, run.device);
    run.loss = plan.loss;
    run.tta = test_time_augmentation(plan.evaluation.tta);
  }

  std::vector<optim::ParamGroup> groups;
  device::with_resource_errors(
      fmt::format("building the model ({}) and its optimizer", config::word(plan.network.name)), models::kSmallerModel,
      [&] {
        const plan::TrainableSpec spec{plan.network, plan.data.normalize,         *plan.train_set, plan.model_init,
                                       plan.optim,   run.step.fast.channels_last, run.device};
        plan::Trainable trainable = plan::assemble_trainable(spec, [&](torch::nn::Sequential& model) {
          run.model = model;
          share_batch_statistics(plan.network, run);
          apply_fast_paths(run.step.fast);
          // After the fast paths: the CPU's peak is measured with the threads they chose.
          run.efficiency = run_efficiency(
              plan.model.sample_macs, run.device,
              math_precision(run.step.amp, run.step.fast.matmul_precision.value, run.device),
              run.world_size * std::max<int64_t>(1, static_cast<int64_t>(run.strategy_plan.replicas.size())));
          run.strategy->prepare(model, run.step.fast.cuda_graph ? parallel::GradientSync::kAfterBackward
                                                                : parallel::GradientSync::kDuringBackward);
        });
        run.model = trainable.model;
        groups = std::move(trainable.groups);
        run.optimizer = std::move(trainable.optimizer);
      });
  run.non_finite = build_non_finite(plan.step, run);
  run.stepper = build_step(run);
  run.schedule = std::make_unique<optim::LrSchedule>(
      plan.optim, run.batch.steps_per_epoch, run.batch.steps_per_epoch * plan.loop.epochs,
      optim::lr_multipliers(groups), optim::trained_epochs(groups), optim::starting_epochs(groups));
  log_run(plan, run, groups);
  return run;
}

}  // namespace gputrain::train
