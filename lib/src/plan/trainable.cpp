#include "gputrain/plan/trainable.h"

#include "gputrain/checkpoint/weights.h"
#include "gputrain/models/factory.h"
#include "gputrain/models/freeze.h"
#include "gputrain/models/whiten.h"
#include "gputrain/step/channels_last.h"

namespace gputrain::plan {

Trainable assemble_trainable(const TrainableSpec& spec, const std::function<void(torch::nn::Sequential&)>& prepare) {
  const config::ModelConfig& model_config = spec.model;
  Trainable out;
  out.model = models::build_model(model_config, spec.train_set.info(), spec.device);
  // Before model.init_from, whose tensors then win; a resumed run's checkpoint restores the same filters.
  models::whiten_first_conv(out.model, model_config, spec.train_set, spec.normalize);
  checkpoint::load_named_weights(*out.model, spec.init.loaded);
  // Frozen parameters hold no gradient or optimizer state; a freeze bounded by
  // model.freeze_epochs holds through the lr schedule (lr 0 at first) instead.
  if (spec.init.freeze_epochs == 0) models::freeze(*out.model, spec.init.freeze);
  if (spec.channels_last) step::to_channels_last(out.model);
  if (prepare) prepare(out.model);
  out.groups =
      optim::param_groups(spec.optim, out.model->named_parameters(), models::first_epochs_only(out.model, model_config),
                          {spec.init.frozen, spec.init.freeze_epochs, spec.init.unfreeze_lr_multiplier});
  out.optimizer = optim::make_optimizer(spec.optim, out.groups);
  return out;
}

}  // namespace gputrain::plan
