#include "gputrain/train/lookahead.h"

#include <ATen/ops/_foreach_copy.h>
#include <ATen/ops/_foreach_lerp.h>
#include <fmt/format.h>

#include "gputrain/common/error.h"
#include "gputrain/train/weight_average.h"

namespace gputrain::train {

namespace {

std::vector<torch::Tensor> trained_parameters(torch::nn::Module& model) {
  std::vector<torch::Tensor> trained;
  for (const torch::Tensor& p : model.parameters()) {
    if (p.requires_grad()) trained.push_back(p.detach());
  }
  return trained;
}

}  // namespace

Lookahead::Lookahead(torch::nn::Module& model, LookaheadOptions options)
    : options_(options), fast_(trained_parameters(model)) {
  GPUTRAIN_CHECK(options.k >= 1 && options.alpha > 0 && options.alpha <= 1,
                 "Lookahead needs k >= 1 and alpha in (0, 1] (got k {}, alpha {})", options.k, options.alpha);
}

void Lookahead::start() {
  torch::NoGradGuard no_grad;
  slow_.clear();
  for (const torch::Tensor& t : fast_) slow_.push_back(t.clone());
}

bool Lookahead::after_step(int64_t step) {
  if (step % options_.k != 0) return false;
  sync();
  return true;
}

void Lookahead::sync() {
  GPUTRAIN_CHECK(started(), "Lookahead::sync before start()");
  if (fast_.empty()) return;
  torch::NoGradGuard no_grad;
  at::_foreach_lerp_(slow_, fast_, options_.alpha);
  at::_foreach_copy_(fast_, slow_);
}

void Lookahead::load(const std::vector<torch::Tensor>& state, const std::string& checkpoint) {
  slow_ = state.empty() ? state : fitting_tensors(state, fast_, "slow weights (optim.lookahead)", checkpoint);
}

}  // namespace gputrain::train
