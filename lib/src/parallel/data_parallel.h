#pragma once
#include "gputrain/parallel/strategy.h"

namespace gputrain::parallel::detail {

class SingleDeviceStrategy : public Strategy {
 public:
  explicit SingleDeviceStrategy(torch::Device device) : device_(device) {}
  std::string describe() const override;
  torch::Device device() const override { return device_; }
  torch::Tensor forward(torch::nn::Sequential& model, const torch::Tensor& inputs, const ThreadSetup& setup) override;

 private:
  torch::Device device_;
};

// One process, one replica per device (nn.DataParallel): each micro-batch is
// scattered by the scatter rule, replicas run on their own threads, outputs
// are gathered on the first device and gradients flow back to one set of
// master weights through LibTorch's replicate().
class DataParallelStrategy : public Strategy {
 public:
  DataParallelStrategy(std::vector<torch::Device> devices, bool log_replicas);
  std::string describe() const override;
  torch::Device device() const override { return devices_.front(); }
  torch::Tensor forward(torch::nn::Sequential& model, const torch::Tensor& inputs, const ThreadSetup& setup) override;

 private:
  std::vector<torch::Device> devices_;
  std::vector<std::string> names_;
  bool log_replicas_;
};

}  // namespace gputrain::parallel::detail
