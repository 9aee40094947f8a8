#include "gputrain/step/running_sums.h"

#include <ATen/Dispatch.h>

namespace gputrain::step {

namespace {

// total += part. Sums of CPU scalars are added in place on the host: an add
// op's dispatch costs more than the sum, and the loop adds 4 a step. The first
// part is copied, so that the in-place adds never write into a batch's own
// tensor (the same one goes into the epoch's and the interval's sums).
void accumulate(torch::Tensor& total, const torch::Tensor& part) {
  const bool on_host = part.is_cpu() && part.dim() == 0;
  if (!total.defined()) {
    total = on_host ? part.clone() : part;
    return;
  }
  if (on_host && total.is_cpu() && total.dim() == 0 && total.scalar_type() == part.scalar_type()) {
    AT_DISPATCH_ALL_TYPES_AND2(at::kBFloat16, at::kHalf, total.scalar_type(), "accumulate",
                               [&] { *total.data_ptr<scalar_t>() += *part.const_data_ptr<scalar_t>(); });
    return;
  }
  total = total + part;
}

}  // namespace

void RunningSums::add(const torch::Tensor& batch_loss_sum, const torch::Tensor& batch_correct, int64_t batch_samples) {
  accumulate(loss, batch_loss_sum);
  if (batch_correct.defined()) accumulate(correct, batch_correct);
  samples += batch_samples;
}

EvalResult RunningSums::collect(bool classification, parallel::Strategy& strategy) const {
  const auto options = torch::TensorOptions().dtype(torch::kFloat64).device(strategy.device());
  torch::Tensor totals = torch::zeros({3}, options);
  if (loss.defined()) totals[0] = loss.to(torch::kFloat64);
  if (correct.defined()) totals[1] = correct.to(torch::kFloat64);
  totals[2] = static_cast<double>(samples);
  strategy.all_reduce_sum(totals);
  const torch::Tensor host = totals.cpu();
  const double* values = host.data_ptr<double>();
  EvalResult r;
  r.classification = classification;
  r.loss_sum = values[0];
  r.correct = static_cast<int64_t>(values[1]);
  r.samples = static_cast<int64_t>(values[2]);
  return r;
}

checkpoint::PartialSums RunningSums::summed(parallel::Strategy& strategy) const {
  checkpoint::PartialSums out;
  auto total = [&strategy](const torch::Tensor& t) {
    if (!t.defined()) return t;
    torch::Tensor copy = t.clone();
    strategy.all_reduce_sum(copy);
    return copy;
  };
  out.loss = total(loss);
  out.correct = total(correct);
  torch::Tensor n = torch::full({}, samples, torch::TensorOptions().dtype(torch::kInt64).device(strategy.device()));
  strategy.all_reduce_sum(n);
  out.samples = n.item<int64_t>();
  return out;
}

void RunningSums::restore(const checkpoint::PartialSums& stored, parallel::Strategy& strategy) {
  *this = RunningSums{};
  if (!strategy.is_primary()) return;
  // copies, never the stored tensors themselves: add() writes into CPU sums in place
  if (stored.loss.defined()) loss = stored.loss.to(strategy.device(), /*non_blocking=*/false, /*copy=*/true);
  if (stored.correct.defined()) correct = stored.correct.to(strategy.device(), /*non_blocking=*/false, /*copy=*/true);
  samples = stored.samples;
}

}  // namespace gputrain::step
