#include "gputrain/step/running_sums.h"

#include <ATen/Dispatch.h>
#include <fmt/format.h>

#include <algorithm>
#include <numeric>
#include <tuple>
#include <unordered_map>

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

std::string class_record_form(int64_t classes) {
  if (classes <= kDenseConfusionClasses) {
    return fmt::format("the confusion matrix ({0} x {0}) and each class's accuracy", classes);
  }
  return fmt::format(
      "each class's accuracy and the {} commonest confusions (true class, predicted class, count): a whole "
      "confusion matrix is kept for up to {} classes, and {} would make {} cells",
      kTopConfusions, kDenseConfusionClasses, classes, classes * classes);
}

void ClassCounts::add(const torch::Tensor& targets, const torch::Tensor& predicted) {
  if (targets.numel() > 0) pairs_.push_back(targets.to(torch::kInt64) * classes_ + predicted.to(torch::kInt64));
}

void ClassCounts::collect(EvalResult& result, parallel::Strategy& strategy) const {
  const torch::Tensor pairs =
      pairs_.empty() ? torch::empty({0}, torch::TensorOptions().dtype(torch::kInt64).device(strategy.device()))
                     : torch::cat(pairs_);
  const auto [keys, inverse, counts] =
      torch::_unique2(pairs, /*sorted=*/true, /*return_inverse=*/false, /*return_counts=*/true);
  // Each rank's distinct pairs and their counts, as one row [keys..., counts...]
  // padded with -1 to the longest rank's. float64 holds them exactly: a key is
  // below kMaxClasses squared (1e10), far under 2^53.
  torch::Tensor longest = torch::full({1}, static_cast<double>(keys.size(0)),
                                      torch::TensorOptions().dtype(torch::kFloat64).device(strategy.device()));
  if (strategy.world_size() > 1) strategy.max_across_processes(longest);
  const auto width = static_cast<int64_t>(longest.item<double>());
  torch::Tensor row = torch::full({2 * width}, -1.0, torch::kFloat64);
  row.narrow(0, 0, keys.size(0)).copy_(keys.cpu());
  row.narrow(0, width, keys.size(0)).copy_(counts.cpu());
  const torch::Tensor rows = strategy.world_size() > 1 ? strategy.rows_of_every_rank(row) : row.unsqueeze(0);

  const auto classes = static_cast<std::size_t>(classes_);
  const bool dense = classes_ <= kDenseConfusionClasses;
  result.class_samples.assign(classes, 0);
  result.class_correct.assign(classes, 0);
  result.confusion.assign(dense ? classes * classes : 0, 0);
  std::unordered_map<int64_t, int64_t> mistakes;  // by key, past the dense bound
  const auto every = rows.accessor<double, 2>();
  for (int64_t rank = 0; rank < rows.size(0); ++rank) {
    for (int64_t i = 0; i < width && every[rank][i] >= 0; ++i) {
      const auto key = static_cast<int64_t>(every[rank][i]);
      const auto count = static_cast<int64_t>(every[rank][width + i]);
      const auto truth = static_cast<std::size_t>(key / classes_);
      const bool right = key % classes_ == key / classes_;
      result.class_samples.at(truth) += count;
      if (right) result.class_correct[truth] += count;
      if (dense) {
        result.confusion[static_cast<std::size_t>(key)] += count;
      } else if (!right) {
        mistakes[key] += count;
      }
    }
  }
  result.correct = std::accumulate(result.class_correct.begin(), result.class_correct.end(), int64_t{0});
  result.top_confusions.clear();
  for (const auto& [key, count] : mistakes) result.top_confusions.push_back({key / classes_, key % classes_, count});
  const auto commoner = [](const Confusion& a, const Confusion& b) {
    return std::tie(b.count, a.truth, a.predicted) < std::tie(a.count, b.truth, b.predicted);
  };
  const std::size_t kept = std::min(kTopConfusions, result.top_confusions.size());
  std::partial_sort(result.top_confusions.begin(), result.top_confusions.begin() + static_cast<std::ptrdiff_t>(kept),
                    result.top_confusions.end(), commoner);
  result.top_confusions.resize(kept);
}

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
