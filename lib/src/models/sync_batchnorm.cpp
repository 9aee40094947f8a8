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

torch::Tensor SyncBatchNormImpl::synchronised(const torch::Tensor& input) {
  const int64_t channels = options_.features;
  std::vector<int64_t> reduced{0};
  for (int64_t d = 2; d < input.dim(); ++d) reduced.push_back(d);
  const torch::Tensor x = input.to(torch::kFloat32);  // statistics in float32, also under autocast
  const auto count = static_cast<double>(input.numel() / std::max<int64_t>(channels, 1));
  const torch::Tensor local =
      torch::cat({x.sum(reduced), x.square().sum(reduced), torch::full({1}, count, x.options())});
  torch::Tensor summed = local.detach().clone();
  sum_(summed);
  if (local.requires_grad()) {
    // The global sums feed every rank's loss: each rank's share of their
    // gradient is the sum of all ranks' gradients of them.
    local.register_hook([sum = sum_](torch::Tensor grad) {
      torch::Tensor total = grad.clone();
      sum(total);
      return total;
    });
  }
  // The summed values, with the gradient passing to `local` as it is (the hook then sums it).
  const torch::Tensor global = summed + (local - local.detach());
  const torch::Tensor n = global.narrow(0, 2 * channels, 1);
  const torch::Tensor mean = global.narrow(0, 0, channels) / n;
  const torch::Tensor var = (global.narrow(0, channels, channels) / n - mean.square()).clamp_min(0);
  {
    torch::NoGradGuard no_grad;
    const double m = options_.momentum;
    running_mean.mul_(1 - m).add_(mean.detach(), m);
    running_var.mul_(1 - m).add_(var.detach() * n.detach() / (n.detach() - 1).clamp_min(1), m);  // unbiased, as torch's
  }
  std::vector<int64_t> per_channel(static_cast<std::size_t>(input.dim()), 1);
  per_channel[1] = channels;
  const torch::Tensor scale = torch::rsqrt(var + options_.eps) * weight;
  return ((x - mean.view(per_channel)) * scale.view(per_channel) + bias.view(per_channel)).to(input.scalar_type());
}

void SyncBatchNormImpl::pretty_print(std::ostream& stream) const {
  stream << fmt::format("SyncBatchNorm{}d({}, eps={}, momentum={})", options_.images ? 2 : 1, options_.features,
                        options_.eps, options_.momentum);
}

}  // namespace gputrain::models::detail
