#include "gputrain/train/trainer.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "gputrain/common/error.h"
#include "gputrain/data/description.h"
#include "gputrain/models/freeze.h"
#include "gputrain/train/evaluate.h"
#include "trainer_state.h"

namespace gputrain::train {

Trainer::Trainer(const plan::RunPlan& plan) : state_(std::make_unique<State>()) {
  State& s = *state_;
  s.loop = plan.loop;
  s.freeze_batchnorm = plan.network.freeze_batchnorm;
  s.loader_workers = plan.train_loader.num_workers;
  s.evaluation = plan.evaluation;
  s.run = build_run(plan);
  const config::EmaConfig& ema = s.evaluation.ema;
  if (ema.decay > 0) s.ema.emplace(*s.run.model, WeightAverageOptions{ema.decay, ema.start_epoch, ema.every});
  const config::LookaheadConfig& lookahead = plan.optim.lookahead;
  if (lookahead.k > 0) s.lookahead.emplace(*s.run.model, LookaheadOptions{lookahead.k, lookahead.alpha});
  s.evals.stop_rules = StopRules(s.evaluation.stop);
}

Trainer::~Trainer() = default;

torch::nn::Sequential Trainer::model() const { return state_->run.model; }

plan::TrainLayout Trainer::layout() const {
  const State& s = *state_;
  plan::TrainLayout l;
  l.strategy = s.run.strategy_plan;
  l.world_size = s.run.world_size;
  l.train_samples = s.run.train_set->info().samples;
  l.batch = s.run.batch;
  l.labeled = s.run.labeled();
  l.classification = s.run.classification();
  l.class_names = s.run.train_set->info().class_names;
  l.skipped_images = static_cast<int64_t>(s.run.train_set->info().skipped.size());
  if (s.run.test_set) l.skipped_images += static_cast<int64_t>(s.run.test_set->info().skipped.size());
  return l;
}

step::EvalResult Trainer::State::evaluate() {
  const bool averaged = ema && ema->started();
  auto swap_average = [&] {
    ema->swap_into_model();
    run.strategy->weights_changed();
  };
  // Every rank evaluates its share of the test set with rank 0's batchnorm statistics (the
  // live ones, and the average's when that is what is evaluated), so the figures are one model's.
  run.strategy->broadcast_buffers(run.model);
  if (averaged) {
    swap_average();
    run.strategy->broadcast_buffers(run.model);
  }
  const step::EvalResult result =
      train::evaluate(run.model, *run.test_batches, *run.strategy, run.loss, run.step.amp, run.tta);
  if (averaged) swap_average();
  models::train_mode(*run.model, freeze_batchnorm);  // frozen batchnorm stays in eval
  return result;
}

step::EvalResult Trainer::evaluate() {
  if (!state_->run.labeled()) throw UserError("the data set has no labels, so there is nothing to evaluate");
  return state_->evaluate();
}

void Trainer::resume(const checkpoint::Checkpoint& checkpoint) {
  State& s = *state_;
  const checkpoint::TrainingState& stored = checkpoint.state();
  checkpoint.load_model(*s.run.model);
  checkpoint.load_optimizer(*s.run.optimizer, s.run.device);
  s.run.scaler->load_state_dict(stored.scaler);
  s.position.restore(stored, checkpoint.name());
  s.sums.restore(stored, *s.run.strategy);
  s.evals.restore(stored, *s.run.model, checkpoint.name());
  if (s.ema) s.ema->load(stored.ema, checkpoint.name());
  if (s.lookahead) {
    s.lookahead->load(stored.lookahead, checkpoint.name());
    if (!s.lookahead->started()) {
      spdlog::info(
          "optim.lookahead: {} holds no slow weights (written without optim.lookahead); they start as a "
          "copy of its weights",
          checkpoint.name());
    }
  } else if (!stored.lookahead.empty()) {
    spdlog::info("{}: its optim.lookahead slow weights are left unused (optim.lookahead.k is 0 in this run)",
                 checkpoint.name());
  }
  checkpoint::restore_rng(stored.rng);
}

void Trainer::State::save_checkpoint(bool regular, bool best) {
  apply_on_nan();  // a checkpoint never follows a non-finite step that train.on_nan: stop has not yet seen
  run.strategy->broadcast_buffers(run.model);  // the checkpoint holds the buffers every rank continues from
  checkpoint::TrainingState state;
  position.save(state);
  sums.save(state, *run.strategy);
  evals.save(state);
  if (ema) state.ema = ema->state();
  if (lookahead) state.lookahead = lookahead->state();
  state.scaler = run.scaler->state_dict();
  state.rng = checkpoint::capture_rng();
  state.batch = run.batch.sizes();
  state.data = data::model_description(run.train_set->info());
  state.config = loop.config_text;
  checkpointer->write(state, *run.model, *run.optimizer, regular, best);
}

}  // namespace gputrain::train
