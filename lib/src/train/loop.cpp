// The training loop: epochs of optimizer steps, the log interval, evaluation
// after each epoch, checkpoints on their cadence and stop requests between steps.
#include <c10/util/StringUtil.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <optional>

#include "epoch_log.h"
#include "gputrain/common/strings.h"
#include "gputrain/device/busy_timer.h"
#include "gputrain/device/host_resources.h"
#include "gputrain/device/memory.h"
#include "gputrain/device/nvtx.h"
#include "gputrain/models/freeze.h"
#include "gputrain/train/evaluate.h"
#include "gputrain/train/faults.h"
#include "trainer_state.h"

namespace gputrain::train {

namespace {

double seconds_since(Clock::time_point start) { return std::chrono::duration<double>(Clock::now() - start).count(); }

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

// The next training batch, inside the "data" range of a profile.
std::optional<data::Batch> next_batch(data::BatchLoader& source) {
  device::NvtxRange range("data");
  return source.next();
}

// The host running out of memory or threads while training.
[[noreturn]] void rethrow_host_exhaustion(int64_t loader_workers, const plan::BatchPlan& batch) {
  device::rethrow_as_resource_error(
      fmt::format("training at data.batch_size {} with {} loader workers", batch.global, loader_workers),
      "Lower data.batch_size (train.accumulation_steps splits a batch into smaller micro-batches), "
      "data.num_workers, or the model's size");
}

}  // namespace

// A function-try-block: running out of GPU memory anywhere in training or
// testing becomes one Error that says what to change, and so does the host
// running out of memory or threads.
TrainSummary Trainer::fit(TrainObserver& observer, const FitOptions& options) try {
  State& s = *state_;
  s.checkpointer = std::make_unique<detail::Checkpointer>(
      s.loop.checkpoint, s.loop.on_sigint == config::OnSigint::kCheckpoint, options, *s.run.strategy,
      s.position.resumed_from, s.position.resumed_path);
  s.rank_timer = std::make_unique<RankTimer>(*s.run.strategy);
  s.profile.reset();
  if (s.loop.profile.epoch > 0 && !options.profile_dir.empty()) {
    s.profile = std::make_unique<ProfileWindow>(s.loop.profile.epoch, s.loop.profile.steps, options.profile_dir,
                                                s.run.device.is_cuda());
  }
  s.stopping = false;
  detail::EpochLog epoch_log(s.loop.epochs, s.run.scaler->enabled());
  ObserverList observers;
  observers.add(&observer);
  observers.add(&epoch_log);
  s.run_start = Clock::now();
  s.evals.eval_s = 0;
  // Not started: a new run, or one resumed from a checkpoint that held no slow weights.
  if (s.lookahead && !s.lookahead->started()) s.lookahead->start();
  TrainSummary summary;
  summary.epochs = s.position.epochs_done;
  const int64_t epochs = s.loop.epochs;
  for (int64_t epoch = s.position.epochs_done + 1; epoch <= epochs && !s.stopping && s.evals.ended_early.empty();
       ++epoch) {
    if (!s.run.labeled()) {
      s.forward_only_epoch(epoch, observers);
      if (!s.stopping) summary.epochs = s.position.epochs_done = epoch;
      continue;
    }
    device::reset_peak_memory(s.run.device);
    EpochMetrics m;
    m.epoch = epoch;
    s.train_epoch(epoch, observers, m);
    if (s.stopping) break;
    m.loader_wait_s = s.run.train_batches->wait_seconds();
    m.step = s.position.step;
    m.samples_per_s = m.epoch_s > 0 ? m.train.samples / m.epoch_s : 0.0;
    if (const Efficiency& e = s.run.efficiency; e.train_flops_per_sample > 0) {
      m.tflops = e.tflops(m.samples_per_s);
      m.peak_share = e.peak_share(m.samples_per_s);
    }
    m.lr = s.run.schedule->lr_at(std::max<int64_t>(s.position.step - 1, 0));
    m.loss_scale = s.run.scaler->scale();
    m.skipped_steps = s.skipped_steps();
    if (s.evals.evaluated_at == s.position.step &&
        s.evals.last_test.samples > 0) {  // train.eval_every_steps evaluated this step
      m.test = s.evals.last_test;
      m.has_test = true;
    } else if (epoch % s.evaluation.every_epochs == 0 || epoch == epochs) {
      m.test = s.evaluate_and_judge(epoch);
      m.has_test = true;
    }
    m.elapsed_s = seconds_since(s.run_start);
    if (s.run.device.is_cuda()) {
      const device::MemoryStats mem = device::memory_stats(s.run.device);
      m.cuda = true;
      m.memory_allocated = mem.allocated;
      m.memory_reserved = mem.reserved;
      m.memory_peak = mem.peak_allocated;
    }
    observers.on_epoch(m);
    s.end_epoch(epoch, m.has_test ? &m.test : nullptr);
    summary.epochs = epoch;
    summary.last_train = m.train;
    if (m.has_test) {
      summary.last_test = m.test;
      summary.has_test = true;
    }
  }
  if (!s.stopping && s.run.labeled()) s.final_weights();
  summary.steps = s.position.step;
  summary.elapsed_s = seconds_since(s.run_start);
  summary.stopped = s.stopping;
  summary.preempted = s.preempted;
  summary.checkpoint = s.checkpointer->last_good();
  summary.target = s.evals.target;
  summary.ended_early = s.evals.ended_early;
  return summary;
} catch (const c10::Error& e) {
  const std::string detail = first_line(e.what_without_backtrace());
  if (detail.find("Expected more than 1 value per channel when training") != std::string::npos) {
    // Batch statistics of one sample are undefined: the epoch's last batch (or a rank's share of one) was a single row.
    const State& s = *state_;
    throw UserError(fmt::format(
        "epoch {}, step {}: a batchnorm layer got a batch of 1 sample while training, where its statistics are "
        "undefined ({} training samples in batches of {} leave a last batch of {}). Set data.drop_last: true, or a "
        "data.batch_size that leaves no batch of 1 (LibTorch: {})",
        s.position.epochs_done + 1, s.position.step + 1, s.run.train_set->info().samples, s.run.batch.micro,
        s.run.batch.last_micro, detail));
  }
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e) == nullptr && !is_out_of_memory(detail)) {
    rethrow_host_exhaustion(state_->loader_workers, state_->run.batch);
  }
  const State& s = *state_;
  OutOfMemoryContext context;
  context.device = failing_device(detail, s.run.device.str());
  context.batch = s.run.batch;
  context.amp = s.run.step.amp != config::AmpMode::kOff;
  context.memory = device::memory_stats(torch::Device(context.device));
  context.detail = detail;
  throw Error(ExitCode::kRuntime, out_of_memory_message(context));
} catch (const std::exception&) {
  rethrow_host_exhaustion(state_->loader_workers, state_->run.batch);
}

void Trainer::State::train_epoch(int64_t epoch, TrainObserver& observer, EpochMetrics& m) {
  models::train_mode(*run.model, freeze_batchnorm);           // frozen batchnorm stays in eval
  run.train_batches->start_epoch(epoch - 1, position.batch);  // batch > 0 when resuming mid-epoch
  const auto epoch_start = Clock::now();
  auto interval_start = epoch_start;
  std::vector<data::Batch> group;
  Progress progress{epoch, loop.epochs, position.batch, run.train_batches->batches_per_epoch(), 0, 0, 0};
  rank_timer->start_interval(position.step, 0);  // the loader's wait counts from the epoch's start
  device::StepBusyTimer busy(run.device);
  auto log_interval = [&] {
    apply_on_nan();
    const step::EvalResult r = sums.interval.collect(run.classification(), *run.strategy);
    const double interval_s = seconds_since(interval_start);
    const double loader_wait_s = run.train_batches->wait_seconds();
    StepMetrics m{epoch,
                  position.step,
                  r.mean_loss(),
                  run.classification() ? std::optional<double>(r.accuracy()) : std::nullopt,
                  interval_s > 0 ? r.samples / interval_s : 0.0,
                  run.schedule->lr_at(position.step - 1),
                  seconds_since(run_start),
                  run.scaler->scale(),
                  skipped_steps(),
                  rank_timer->end_interval(position.step, interval_s, loader_wait_s)};
    progress.last_loss = m.loss;
    observer.on_step(m);
    sums.interval = step::RunningSums{};
    interval_start = Clock::now();
    rank_timer->start_interval(position.step, loader_wait_s);
  };
  auto flush_group = [&] {
    busy.step_begin();
    {
      const std::unique_ptr<StepMark> mark = profile ? profile->before_step(epoch, position.step + 1) : nullptr;
      optimizer_step(group);
    }
    if (profile) profile->after_step();
    busy.step_end();
    group.clear();
    if (position.step % loop.log_every == 0) log_interval();
    after_step(epoch);  // after the log line, so that a checkpoint holds the interval as it continues
  };
  while (!stopping && evals.ended_early.empty()) {
    std::optional<data::Batch> next = next_batch(*run.train_batches);
    if (!next) break;
    progress.samples += next->global_size();
    group.push_back(std::move(*next));
    ++position.batch;
    if (static_cast<int64_t>(group.size()) == run.batch.accumulation) flush_group();
    ++progress.batch;
    progress.epoch_elapsed_s = seconds_since(epoch_start);
    observer.on_progress(progress);
  }
  if (!group.empty() && evals.ended_early.empty()) flush_group();  // the epoch's last, shorter group still steps
  if (profile) profile->end_epoch();
  if (stopping) return;
  apply_on_nan();
  m.train = sums.epoch.collect(run.classification(), *run.strategy);
  m.epoch_s = seconds_since(epoch_start);
  if (const std::optional<double> busy_s = busy.take_busy_seconds(); busy_s && m.epoch_s > 0) {
    m.gpu_busy = *busy_s / m.epoch_s;
  }
}

// One optimizer step, then the train.on_nan policy for a loss that was not finite.
void Trainer::State::optimizer_step(const std::vector<data::Batch>& group) {
  run.schedule->apply(*run.optimizer, position.step);
  const step::StepResult result = run.stepper->run(group, [this](const torch::Tensor& step_loss) {
    return run.strategy->agree(checkpointer->requests(), step_loss);
  });
  agreed = result.agreed;
  ++position.step;
  if (run.non_finite) {
    int64_t samples = 0;
    for (const data::Batch& mb : group) samples += mb.size();
    run.non_finite->stepped(position.step, samples);
  }
  if (agreed.non_finite) {
    if (run.step.on_nan == config::OnNan::kStop) {
      throw Error(ExitCode::kRuntime,
                  non_finite_loss_message(position.epochs_done + 1, {1, position.step, position.step, 0},
                                          checkpointer->last_good()));
    }
    sums.skip(1, 0);  // its samples were never added
    spdlog::warn(
        "epoch {}, step {}: the loss is not finite; batch skipped without an optimizer step (train.on_nan: "
        "skip, {} so far)",
        position.epochs_done + 1, position.step, sums.nan_skipped);
    return;
  }
  for (const step::MicroBatchSums& micro_batch : result.sums) sums.add(micro_batch);
  if (result.scaler_skipped_at) {
    spdlog::warn("step {}: inf/NaN gradients under fp16; step skipped, loss scale backs off from {}", position.step,
                 *result.scaler_skipped_at);
  }
}

void Trainer::State::forward_only_epoch(int64_t epoch, TrainObserver& observer) {
  torch::NoGradGuard no_grad;
  run.model->eval();
  run.train_batches->start_epoch(epoch - 1);
  const auto epoch_start = Clock::now();
  int64_t samples = 0;
  while (auto next = run.train_batches->next()) {
    const data::Batch& local = *next;  // this process's rows (ddp: its rank's)
    run.strategy->log_share(local);
    const torch::Tensor outputs = run.strategy->forward(run.model, local.inputs);
    samples += local.size();
    spdlog::debug("forward: input {} output {}", c10::str(local.inputs.sizes()), c10::str(outputs.sizes()));
    if (checkpointer->stop_requested()) {  // nothing trains here, so there is nothing to checkpoint
      stopping = true;
      return;
    }
  }
  EpochMetrics m;
  m.epoch = epoch;
  m.train.samples = samples;
  m.train.classification = false;
  m.epoch_s = seconds_since(epoch_start);
  m.loader_wait_s = run.train_batches->wait_seconds();
  m.samples_per_s = m.epoch_s > 0 ? samples / m.epoch_s : 0.0;
  m.elapsed_s = seconds_since(run_start);
  observer.on_epoch(m);
}

void Trainer::State::after_step(int64_t epoch) {
  // Before the average, which then takes the synced weights; dp's replicas copy them afresh.
  if (lookahead && lookahead->after_step(position.step)) run.strategy->weights_changed();
  if (ema) ema->after_step(position.step, epoch);
  // Before the checkpoint, which then holds what the evaluation changed (train.early_stopping's count).
  const int64_t every = evaluation.every_steps;
  if (every > 0 && position.step % every == 0) {
    const step::EvalResult& test = evaluate_and_judge(epoch);
    spdlog::info("step {} (epoch {}): {}", position.step, epoch, format_test_line(test));
  }
  const detail::Checkpointer::Due due = checkpointer->due_after_step(position.step, agreed);
  if (due.checkpoint) save_checkpoint(/*regular=*/true, /*best=*/false);
  stopping = due.stop;
  preempted = due.preempt;
}

void Trainer::State::apply_on_nan() {
  if (!run.non_finite) return;
  const step::NonFiniteSeen seen = run.non_finite->read();
  if (seen.steps == 0) return;
  if (run.step.on_nan == config::OnNan::kStop) {
    throw Error(ExitCode::kRuntime, non_finite_loss_message(position.epochs_done + 1, seen, checkpointer->last_good()));
  }
  sums.skip(seen.steps, seen.samples);
  spdlog::warn(
      "epoch {}, {}: the loss is not finite; {} skipped without an optimizer step (train.on_nan: skip, {} so far)",
      position.epochs_done + 1, step::step_range(seen), count_of(seen.steps, "step"), sums.nan_skipped);
}

const step::EvalResult& Trainer::State::evaluate_and_judge(int64_t epoch) {
  apply_on_nan();  // a model that took non-finite steps under train.on_nan: stop is not judged
  // A resumed run evaluating again the step its checkpoint was judged at (the epoch's end) judges it once.
  const bool judged = evals.evaluated_at == position.step;
  const auto start = Clock::now();
  evals.last_test = evaluate();
  evals.eval_s += seconds_since(start);
  evals.evaluated_at = position.step;
  if (judged) return evals.last_test;
  const StopVerdict verdict = evals.stop_rules.judge(evals.last_test);
  const StopRulesOptions& rules = evaluation.stop;
  if (verdict.improved && evaluation.restore_best) {
    const std::vector<torch::Tensor> scored = ema && ema->started() ? ema->state() : weights_and_buffers(*run.model);
    evals.best_weights.clear();
    for (const torch::Tensor& t : scored) evals.best_weights.push_back(t.detach().clone());
  }
  if (verdict.target_reached) {
    const double wall_s = seconds_since(run_start);
    evals.target = TargetReached{rules.target_accuracy, evals.last_test.accuracy(), epoch,
                                 position.step,         wall_s - evals.eval_s,      wall_s};
    evals.ended_early = fmt::format(
        "test accuracy {:.2f}% reached train.target_accuracy ({:.2f}%) at step {}, epoch {}: {:.2f} s of "
        "training, {:.2f} s wall",
        100 * evals.target->accuracy, 100 * evals.target->target, position.step, epoch, evals.target->train_s,
        evals.target->wall_s);
  } else if (verdict.patience_used_up) {
    evals.ended_early = fmt::format(
        "early stopping at step {}, epoch {}: the test {} has not improved by more than {} for {} evaluations",
        position.step, epoch, evals.stop_rules.by_accuracy() ? "accuracy" : "loss", rules.min_delta, rules.patience);
  }
  if (!evals.ended_early.empty()) spdlog::info("{}", evals.ended_early);
  return evals.last_test;
}

void Trainer::State::end_epoch(int64_t epoch, const step::EvalResult* test) {
  const bool complete = position.batch >= run.train_batches->batches_per_epoch();
  position.epochs_done = epoch;
  position.batch = 0;
  sums.start_epoch();
  const bool improved = test != nullptr && evals.improves_best(*test, run.classification());
  // An epoch an evaluation ended part-way is no place to resume from.
  const bool regular = complete && checkpointer->due_at_epoch_end(epoch);
  const bool best = improved && checkpointer->keeps_best();
  if (regular || best) save_checkpoint(regular, best);
}

void Trainer::State::final_weights() {
  torch::NoGradGuard no_grad;
  if (evaluation.restore_best && !evals.best_weights.empty()) {
    std::vector<torch::Tensor> model_tensors = weights_and_buffers(*run.model);
    for (std::size_t i = 0; i < model_tensors.size(); ++i) model_tensors[i].detach().copy_(evals.best_weights[i]);
    spdlog::info("train.early_stopping.restore_best: the model ends with the weights that scored best");
  } else if (ema && ema->started()) {
    ema->copy_into_model();
    spdlog::info("train.ema: the model ends with the weight average");
  } else {
    return;
  }
  run.strategy->weights_changed();
}

}  // namespace gputrain::train
