#pragma once
// optim.muon: Muon (airbench94_muon's optimizer) for the convolution weights,
// SGD, Adam or AdamW for the other parameters, as one optimizer.
//
// Muon's step for a weight W of shape [out, in, kh, kw] with gradient G:
//   B = momentum × B + G                        (the momentum buffer, started at 0)
//   U = G + momentum × B  (nesterov)  or  B
//   W = W × sqrt(out) / ||W||_F                 (the weight's scale fixed; it sits before a batchnorm)
//   W = W − lr × newton_schulz(U as [out, in·kh·kw], steps)
// With SGD the other groups take SGD's step (PyTorch's fused SGD kernel);
// every group's state is SGD's (SGDParamState: a momentum buffer per
// parameter) and its options SGDOptions, so checkpoints hold it as an SGD's.
// With Adam or AdamW the optimizer is the multi-tensor Adam/AdamW
// (optim/multi_tensor.h) whose Muon groups take Muon's step instead: their
// state is Adam's (B is exp_avg; exp_avg_sq and the step count go unused), so
// checkpoints hold it as an Adam's.
#include <torch/optim/optimizer.h>
#include <torch/optim/sgd.h>
#include <torch/types.h>

#include <memory>
#include <vector>

namespace gputrain::optim {

// The quintic Newton–Schulz iteration of airbench94_muon and Keller Jordan's
// Muon (coefficients 3.4445, −4.7750, 2.0315) on the 2-D `g` scaled to
// Frobenius norm 1: a matrix of g's shape near U Vᵀ (g = U S Vᵀ) whose
// singular values lie in about [0.7, 1.2] after 3 to 5 steps rather than at
// exactly 1. Computed in g's dtype on its device, with no host read.
torch::Tensor newton_schulz(const torch::Tensor& g, int64_t steps);

namespace detail {

// Which groups of an optimizer take Muon's step, and its settings.
struct MuonGroups {
  std::vector<bool> orthogonal;  // per group; empty: none
  double momentum = 0;
  bool nesterov = false;
  int64_t steps = 0;  // Newton–Schulz iterations

  bool has(std::size_t group) const { return group < orthogonal.size() && orthogonal[group]; }
};

// Muon's step on 4-D `params` with their `buffers` (updated in place), on the
// device: `lr` a device scalar, `keep` SplitStep::keep_unless_found's factor
// (undefined: nothing to skip on), so a skipped step changes nothing.
void muon_update(const std::vector<torch::Tensor>& params, const std::vector<torch::Tensor>& grads,
                 const std::vector<torch::Tensor>& buffers, double momentum, bool nesterov, int64_t steps,
                 const torch::Tensor& lr, const torch::Tensor& keep);

// `orthogonal[g]`: group g takes Muon's step (its tensors 4-D), else SGD's.
std::unique_ptr<torch::optim::Optimizer> make_muon(std::vector<torch::optim::OptimizerParamGroup> groups,
                                                   const torch::optim::SGDOptions& defaults,
                                                   std::vector<bool> orthogonal, int64_t steps);

}  // namespace detail
}  // namespace gputrain::optim
