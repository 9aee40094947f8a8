#include "sync_batchnorm.h"

#include <ATen/Context.h>
#include <fmt/format.h>

namespace gputrain::models::detail {

SyncBatchNormImpl::SyncBatchNormImpl(SyncBatchNormOptions options) : options_(options) { reset(); }

void SyncBatchNormImpl::reset() {
  weight = register_parameter("weight", torch::ones({options_.features}));
  bias = register_parameter("bias", torch::zeros({options_.features}));
  running_mean = register_buffer("running_mean", torch::zeros({options_.features}));
  running_var = register_buffer("running_var", torch::ones({options_.features}));
  num_batches_tracked = register_buffer("num_batches_tracked", torch::zeros({}, torch::kLong));
}

torch::Tensor SyncBatchNormImpl::forward(const torch::Tensor& input) {
  if (is_training()) {
    torch::NoGradGuard no_grad;
    num_batches_tracked.add_(1);
  }
  if (is_training() && sum_) return synchronised(input);
  return torch::batch_norm(input, weight, bias, running_mean, running_var, is_training(), options_.momentum,
                           options_.eps, at::globalContext().userEnabledCuDNN());
}

namespace {

// One value per channel of `x` (its first sample's first position): a shift that brings the rank's
// values near zero, so their float32 moments keep their precision however large the mean.
torch::Tensor first_per_channel(const torch::Tensor& x) {
  torch::Tensor first = x.select(0, 0);
  return first.dim() > 1 ? first.flatten(1).select(1, 0) : first;
}

}  // namespace

// The statistics are combined as Chan et al.'s parallel variance does (what
// PyTorch's SyncBatchNorm does with batch_norm_gather_stats_with_counts):
// each rank's count, mean and sum of squared deviations M2 (Welford's, of its
// values shifted by one of them), then the global mean and M2 = sum of M2_r +
// sum of n_r (mean_r - mean)^2, in float64. Sums of x and x^2 in float32
// would lose the variance to cancellation once |mean| >> std.
torch::Tensor SyncBatchNormImpl::synchronised(const torch::Tensor& input) {
  const int64_t channels = options_.features;
  std::vector<int64_t> reduced{0};
  for (int64_t d = 2; d < input.dim(); ++d) reduced.push_back(d);
  std::vector<int64_t> per_channel(static_cast<std::size_t>(input.dim()), 1);
  per_channel[1] = channels;
  const torch::Tensor x = input.to(torch::kFloat32);  // statistics in float32 or wider, also under autocast
  const auto count = static_cast<double>(input.numel() / std::max<int64_t>(channels, 1));
  torch::Tensor mean, var, n;
  {
    torch::NoGradGuard no_grad;
    const auto wide = x.options().dtype(torch::kFloat64);
    torch::Tensor local_mean = torch::zeros({channels}, wide);
    torch::Tensor local_m2 = torch::zeros({channels}, wide);
    if (count > 0) {  // a rank the batch did not reach has no rows
      const torch::Tensor shift = first_per_channel(x);
      const auto [shifted_var, shifted_mean] =
          torch::var_mean(x - shift.view(per_channel), reduced, /*unbiased=*/false, /*keepdim=*/false);
      local_mean = shift.to(torch::kFloat64) + shifted_mean.to(torch::kFloat64);
      local_m2 = shifted_var.to(torch::kFloat64) * count;
    }
    // Two sums across the processes: the counts and n_r * mean_r give the global mean; then M2.
    torch::Tensor totals = torch::cat({torch::full({1}, count, wide), local_mean * count});
    sum_(totals);
    n = totals.narrow(0, 0, 1);
    const torch::Tensor global_mean = totals.narrow(0, 1, channels) / n;
    torch::Tensor m2 = local_m2 + (local_mean - global_mean).square() * count;
    sum_(m2);
    mean = global_mean.to(torch::kFloat32);
    var = (m2 / n).to(torch::kFloat32);
    const double m = options_.momentum;
    running_mean.mul_(1 - m).add_(mean, m);
    running_var.mul_(1 - m).add_((m2 / (n - 1).clamp_min(1)).to(torch::kFloat32), m);  // unbiased, as torch's
    n = n.to(torch::kFloat32);
  }
  if (x.requires_grad()) {
    // The gradient reaches the inputs through the global sums of x and of
    // (x - mean)^2 (mean held fixed: the variance's derivative through the
    // mean is zero), whose values are already in `mean` and `var`: each term
    // below is zero and carries only their gradient. The global sums feed
    // every rank's loss, so each rank's share of their gradient is the sum of
    // all ranks' gradients of them.
    const torch::Tensor local = torch::cat({x.sum(reduced), (x - mean.view(per_channel)).square().sum(reduced)});
    local.register_hook([sum = sum_](torch::Tensor grad) {
      torch::Tensor total = grad.clone();
      sum(total);
      return total;
    });
    const torch::Tensor moments = (local - local.detach()) / n;
    mean = mean + moments.narrow(0, 0, channels);
    var = var + moments.narrow(0, channels, channels);
  }
  const torch::Tensor scale = torch::rsqrt(var + options_.eps) * weight;
  return ((x - mean.view(per_channel)) * scale.view(per_channel) + bias.view(per_channel)).to(input.scalar_type());
}

void SyncBatchNormImpl::pretty_print(std::ostream& stream) const {
  stream << fmt::format("SyncBatchNorm{}d({}, eps={}, momentum={})", options_.images ? 2 : 1, options_.features,
                        options_.eps, options_.momentum);
}

}  // namespace gputrain::models::detail
