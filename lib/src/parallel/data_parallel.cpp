#include "data_parallel.h"

#include <spdlog/spdlog.h>
#include <torch/nn/parallel/data_parallel.h>

#include <exception>
#include <thread>

#include "gputrain/logging/format.h"
#include "gputrain/parallel/split.h"

namespace gputrain::parallel::detail {

std::string SingleDeviceStrategy::describe() const { return fmt::format("single device {}", device_.str()); }

torch::Tensor SingleDeviceStrategy::forward(torch::nn::Sequential& model, const torch::Tensor& inputs,
                                            const ThreadSetup& setup) {
  const auto guard = setup ? setup() : nullptr;
  return model->forward(inputs.to(device_, /*non_blocking=*/true));
}

DataParallelStrategy::DataParallelStrategy(std::vector<torch::Device> devices, bool log_replicas)
    : devices_(std::move(devices)), log_replicas_(log_replicas) {
  for (const auto& d : devices_) names_.push_back(d.str());
  if (log_replicas_) {
    const bool cuda = devices_.front().is_cuda();
    // The seed tutorial's announcement, for GPUs and for CPU replica threads.
    spdlog::info("Let's use {} {}!", devices_.size(),
                 cuda ? "GPUs" : (devices_.size() == 1 ? "CPU replica" : "CPU replicas"));
  }
}

std::string DataParallelStrategy::describe() const {
  return fmt::format("data-parallel over {} replicas ({})", devices_.size(), fmt::join(names_, ", "));
}

torch::Tensor DataParallelStrategy::forward(torch::nn::Sequential& model, const torch::Tensor& inputs,
                                            const ThreadSetup& setup) {
  const std::vector<ReplicaSplit> splits = split_batch(inputs.size(0), names_);
  const std::size_t n = splits.size();
  const std::vector<torch::Tensor> chunks = inputs.split_with_sizes(chunk_sizes(splits));
  std::vector<torch::Device> used(devices_.begin(), devices_.begin() + static_cast<std::ptrdiff_t>(n));
  // One replica needs no copies; several get fresh ones each step, like
  // nn.DataParallel, whose gradients flow back into `model`.
  std::vector<std::shared_ptr<torch::nn::SequentialImpl>> replicas;
  if (n == 1) {
    replicas.push_back(model.ptr());
  } else {
    replicas = torch::nn::parallel::replicate(model.ptr(), used);
  }
  std::vector<torch::Tensor> outputs(n);
  std::vector<std::exception_ptr> errors(n);
  auto run = [&](std::size_t i) {
    try {
      const auto guard = setup ? setup() : nullptr;
      outputs[i] = replicas[i]->forward(chunks[i].to(used[i], /*non_blocking=*/true));
    } catch (...) {
      errors[i] = std::current_exception();
    }
  };
  std::vector<std::thread> threads;
  for (std::size_t i = 1; i < n; ++i) threads.emplace_back(run, i);
  run(0);
  for (auto& t : threads) t.join();
  for (const auto& error : errors) {
    if (error) std::rethrow_exception(error);
  }
  if (log_replicas_) {  // in replica order, so the log reads the same every run
    for (std::size_t i = 0; i < n; ++i) {
      spdlog::info("\tIn Model: input size {} output size {}", logging::shape_str(chunks[i]),
                   logging::shape_str(outputs[i]));
    }
  }
  std::vector<torch::Tensor> gathered;
  for (const auto& out : outputs) gathered.push_back(out.to(device(), /*non_blocking=*/true));
  torch::Tensor result = n == 1 ? gathered.front() : torch::cat(gathered, 0);
  if (log_replicas_) {
    spdlog::info("Outside: input size {} output_size {}", logging::shape_str(inputs), logging::shape_str(result));
  }
  return result;
}

}  // namespace gputrain::parallel::detail
