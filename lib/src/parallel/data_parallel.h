#pragma once
#include <memory>

#include "gputrain/parallel/strategy.h"

namespace gputrain::parallel::detail {

class SingleDeviceStrategy : public Strategy {
 public:
  explicit SingleDeviceStrategy(torch::Device device) : device_(device) {}
  std::string describe() const override;
  torch::Device device() const override { return device_; }
  torch::Tensor forward(torch::nn::Sequential& model, const torch::Tensor& inputs) override;

 private:
  torch::Device device_;
};

class ReplicaThreads;

// One process, one replica per device (nn.DataParallel): each micro-batch is
// scattered by the scatter rule, replicas run on their own threads, outputs
// are gathered on the first device. The first replica is the model itself;
// the others are copies made once and kept, with threads kept as long
// (LibTorch's replicate() per step re-initialises and copies every layer and
// starts a thread per replica: pytorch/pytorch#40581). Their gradients are
// summed into the model's after backward, and the model's weights and
// buffers are copied into them, in place, before the first forward pass
// after each optimizer step.
class DataParallelStrategy : public Strategy {
 public:
  DataParallelStrategy(std::vector<torch::Device> devices, bool log_replicas);
  ~DataParallelStrategy() override;
  std::string describe() const override;
  torch::Device device() const override { return devices_.front(); }
  torch::Tensor forward(torch::nn::Sequential& model, const torch::Tensor& inputs) override;
  void after_backward(torch::nn::Sequential& model) override;
  void weights_changed() override { stale_ = true; }

 private:
  // The copies for devices_[1..], made on first use and refreshed when stale.
  void update_replicas(torch::nn::Sequential& model);

  std::vector<torch::Device> devices_;
  std::vector<std::string> names_;
  bool log_replicas_;
  std::shared_ptr<torch::nn::SequentialImpl> source_;               // the model the copies were made from
  std::vector<std::shared_ptr<torch::nn::SequentialImpl>> copies_;  // one per devices_[1..]
  bool stale_ = true;  // the model's weights changed since the copies were refreshed
  std::unique_ptr<ReplicaThreads> threads_;
};

}  // namespace gputrain::parallel::detail
