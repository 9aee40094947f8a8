#pragma once
// model.freeze's mechanics: parameters that do not train, and batchnorm
// layers that keep their statistics. Which parameters is the plan's to
// resolve (plan/model_init.h); these only apply it.
#include <torch/nn/module.h>
#include <torch/nn/modules/container/sequential.h>

#include <string>
#include <vector>

#include "gputrain/config/config.h"

namespace gputrain::models {

// Whether the dotted parameter name `name` lies under `prefix`: the name
// itself, or a name inside it ("conv1" covers conv1.weight, not conv10.weight).
bool under_prefix(const std::string& name, const std::string& prefix);

// Sets requires_grad false on every parameter under one of `prefixes`; they
// then get no gradient, and the optimizer and ddp's Reducer leave them out.
void freeze(torch::nn::Module& model, const std::vector<std::string>& prefixes);

// The parameters that train (requires_grad), by name, in model order.
std::vector<std::pair<std::string, torch::Tensor>> trainable_parameters(const torch::nn::Module& model);

// model.train(), except that under FrozenBatchnorm::kEval a batchnorm layer
// whose parameters are all frozen stays in eval mode: it normalises with its
// running statistics and does not update them. Every place that puts the
// model back into training mode calls this instead of train().
void train_mode(torch::nn::Module& model, config::FrozenBatchnorm frozen_batchnorm);

// The first batchnorm layer (its name) that, in `model`'s present modes (set
// by train_mode), normalises one value per channel of a sample of
// `sample_shape`: one after a linear layer, or on a 1x1 map. Its batch
// statistics need 2 samples or more in every training forward pass (LibTorch:
// "Expected more than 1 value per channel when training"). "" when none does.
std::string batchnorm_of_single_values(torch::nn::Sequential& model, const std::vector<int64_t>& sample_shape);

// Gives `copy` (a clone of `model`: a dp replica) each parameter's
// requires_grad and each module's mode, which clone() does not keep.
void mirror_training_state(const torch::nn::Module& model, torch::nn::Module& copy);

}  // namespace gputrain::models
