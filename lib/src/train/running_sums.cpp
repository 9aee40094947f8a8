#include "running_sums.h"

namespace gputrain::train::detail {

void RunningSums::add(const torch::Tensor& batch_loss_sum, const torch::Tensor& batch_correct, int64_t batch_samples) {
  loss = loss.defined() ? loss + batch_loss_sum : batch_loss_sum;
  if (batch_correct.defined()) correct = correct.defined() ? correct + batch_correct : batch_correct;
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
  if (stored.loss.defined()) loss = stored.loss.to(strategy.device());
  if (stored.correct.defined()) correct = stored.correct.to(strategy.device());
  samples = stored.samples;
}

torch::Tensor correct_count(const torch::Tensor& outputs, const torch::Tensor& targets, bool classification) {
  if (!classification) return {};
  return outputs.argmax(1).eq(targets).sum();
}

}  // namespace gputrain::train::detail
