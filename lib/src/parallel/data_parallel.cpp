#include "data_parallel.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/ThreadLocalState.h>
#include <ATen/autocast_mode.h>
#include <ATen/core/Generator.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/StreamGuard.h>
#include <c10/core/impl/DeviceGuardImplInterface.h>
#include <c10/util/StringUtil.h>
#include <spdlog/spdlog.h>

#include <condition_variable>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

#include "gputrain/models/freeze.h"
#include "gputrain/parallel/split.h"

namespace gputrain::parallel::detail {

std::string SingleDeviceStrategy::describe() const { return fmt::format("single device {}", device_.str()); }

torch::Tensor SingleDeviceStrategy::forward(torch::nn::Sequential& model, const torch::Tensor& inputs) {
  return model->forward(inputs.to(device_, /*non_blocking=*/true));
}

// Threads 1..n-1 of the replicas, started once and kept: each call runs
// task(0) on the calling thread and task(i) on thread i, and returns when all
// are done, rethrowing the first exception. Every task runs under the
// caller's thread-local state (grad mode, autocast, ...), as PyTorch's
// parallel_apply does.
class ReplicaThreads {
 public:
  explicit ReplicaThreads(std::size_t helpers) {
    for (std::size_t i = 1; i <= helpers; ++i) workers_.emplace_back([this, i] { work(i); });
  }
  ~ReplicaThreads() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      closing_ = true;
    }
    wake_.notify_all();
    for (auto& t : workers_) t.join();
  }
  ReplicaThreads(const ReplicaThreads&) = delete;
  ReplicaThreads& operator=(const ReplicaThreads&) = delete;

  void run(std::size_t n, const std::function<void(std::size_t)>& task) {
    std::vector<std::exception_ptr> errors(n);
    const at::ThreadLocalState state;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      task_ = &task;
      state_ = &state;
      errors_ = &errors;
      active_ = n;
      pending_ = n - 1;
      ++generation_;
    }
    wake_.notify_all();
    run_one(0, task, errors);
    {
      std::unique_lock<std::mutex> lock(mutex_);
      done_.wait(lock, [this] { return pending_ == 0; });
      task_ = nullptr;
    }
    for (const auto& error : errors) {
      if (error) std::rethrow_exception(error);
    }
  }

 private:
  static void run_one(std::size_t i, const std::function<void(std::size_t)>& task,
                      std::vector<std::exception_ptr>& errors) {
    try {
      task(i);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  }

  void work(std::size_t i) {
    uint64_t seen = 0;
    std::unique_lock<std::mutex> lock(mutex_);
    while (true) {
      wake_.wait(lock, [&] { return closing_ || generation_ != seen; });
      if (closing_) return;
      seen = generation_;
      if (i >= active_) continue;  // a batch too small to reach this replica
      const auto* task = task_;
      const auto* state = state_;
      auto* errors = errors_;
      lock.unlock();
      {
        at::ThreadLocalStateGuard guard(*state);
        run_one(i, *task, *errors);
        // Autocast caches its casts of the weights per thread until the
        // outermost scope ends; this thread outlives the step, so it ends here.
        at::autocast::clear_cache();
      }
      lock.lock();
      if (--pending_ == 0) done_.notify_all();
    }
  }

  std::vector<std::thread> workers_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable done_;
  bool closing_ = false;
  uint64_t generation_ = 0;
  std::size_t active_ = 0;
  std::size_t pending_ = 0;
  const std::function<void(std::size_t)>* task_ = nullptr;
  const at::ThreadLocalState* state_ = nullptr;
  std::vector<std::exception_ptr>* errors_ = nullptr;
};

DataParallelStrategy::DataParallelStrategy(std::vector<torch::Device> devices, bool log_replicas)
    : devices_(std::move(devices)), log_replicas_(log_replicas) {
  for (const auto& d : devices_) names_.push_back(d.str());
  if (log_replicas_) {
    const bool cuda = devices_.front().is_cuda();
    // The multi-GPU (DataParallel) tutorial's announcement, for GPUs and for CPU replica threads.
    spdlog::info("Let's use {} {}!", devices_.size(),
                 cuda ? "GPUs" : (devices_.size() == 1 ? "CPU replica" : "CPU replicas"));
  }
}

DataParallelStrategy::~DataParallelStrategy() = default;

std::string DataParallelStrategy::describe() const {
  return fmt::format("data-parallel over {} replica{} ({})", devices_.size(), devices_.size() == 1 ? "" : "s",
                     fmt::join(names_, ", "));
}

void DataParallelStrategy::update_replicas(torch::nn::Sequential& model) {
  if (source_ != model.ptr()) {
    source_ = model.ptr();
    copies_.clear();
    // clone() re-runs every layer's initialiser before copying the weights:
    // put the global generator back, so that dp draws what one device draws.
    at::Generator generator = at::detail::getDefaultCPUGenerator();
    at::Tensor saved;
    {
      std::lock_guard<std::mutex> lock(generator.mutex());
      saved = generator.get_state();
    }
    for (std::size_t i = 1; i < devices_.size(); ++i) {
      copies_.push_back(std::dynamic_pointer_cast<torch::nn::SequentialImpl>(model->clone(devices_[i])));
    }
    {
      std::lock_guard<std::mutex> lock(generator.mutex());
      generator.set_state(saved);
    }
    threads_ = std::make_unique<ReplicaThreads>(copies_.size());
    stale_ = false;
    return;
  }
  if (!stale_) return;
  torch::NoGradGuard no_grad;
  const auto params = model->parameters();
  const auto buffers = model->buffers();
  for (auto& copy : copies_) {
    auto copy_params = copy->parameters();
    for (std::size_t p = 0; p < params.size(); ++p) copy_params[p].copy_(params[p], /*non_blocking=*/true);
    auto copy_buffers = copy->buffers();
    for (std::size_t b = 0; b < buffers.size(); ++b) copy_buffers[b].copy_(buffers[b], /*non_blocking=*/true);
  }
  stale_ = false;
}

torch::Tensor DataParallelStrategy::forward(torch::nn::Sequential& model, const torch::Tensor& inputs) {
  const std::vector<ReplicaSplit> splits = split_batch(inputs.size(0), names_);
  const std::size_t n = splits.size();
  const std::vector<torch::Tensor> chunks = inputs.split_with_sizes(chunk_sizes(splits));
  std::vector<torch::Tensor> outputs(n);
  if (n == 1) {
    outputs[0] = model->forward(chunks[0].to(devices_[0], /*non_blocking=*/true));
  } else {
    update_replicas(model);
    // clone() keeps neither model.freeze's requires_grad nor the modes (a frozen batchnorm in eval): the
    // replicas would compute gradients the frozen parameters must not get.
    for (auto& copy : copies_) models::mirror_training_state(*model, *copy);
    // Each replica runs on its device, on the stream the caller uses there.
    std::vector<c10::Stream> streams;
    for (std::size_t i = 0; i < n; ++i) {
      streams.push_back(c10::impl::getDeviceGuardImpl(devices_[i].type())->getStream(devices_[i]));
    }
    threads_->run(n, [&](std::size_t i) {
      const c10::DeviceGuard device_guard(devices_[i]);
      const c10::StreamGuard stream_guard(streams[i]);
      torch::nn::SequentialImpl& replica = i == 0 ? *model : *copies_[i - 1];
      outputs[i] = replica.forward(chunks[i].to(devices_[i], /*non_blocking=*/true));
    });
  }
  if (log_replicas_) {  // in replica order, so the log reads the same every run
    for (std::size_t i = 0; i < n; ++i) {
      spdlog::info("\tIn Model: input size {} output size {}", c10::str(chunks[i].sizes()),
                   c10::str(outputs[i].sizes()));
    }
  }
  std::vector<torch::Tensor> gathered;
  for (const auto& out : outputs) gathered.push_back(out.to(device(), /*non_blocking=*/true));
  torch::Tensor result = n == 1 ? gathered.front() : torch::cat(gathered, 0);
  if (log_replicas_) {
    spdlog::info("Outside: input size {} output_size {}", c10::str(inputs.sizes()), c10::str(result.sizes()));
  }
  return result;
}

void DataParallelStrategy::after_backward(torch::nn::Sequential& model) {
  if (copies_.empty()) return;
  torch::NoGradGuard no_grad;
  auto params = model->parameters();
  for (auto& copy : copies_) {
    auto copy_params = copy->parameters();
    for (std::size_t p = 0; p < params.size(); ++p) {
      torch::Tensor& from = copy_params[p].mutable_grad();
      if (!from.defined()) continue;
      torch::Tensor& into = params[p].mutable_grad();
      const torch::Tensor moved = from.to(params[p].device(), /*non_blocking=*/true);
      if (into.defined()) {
        into.add_(moved);
      } else {
        into = moved;  // the copy lets go of it just below
      }
      from.reset();
    }
  }
  stale_ = true;  // the optimizer step comes next
}

}  // namespace gputrain::parallel::detail
