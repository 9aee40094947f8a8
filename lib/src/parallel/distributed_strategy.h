#pragma once
// ddp's strategy: distributed.cpp joins the ranks and runs the collectives of
// a step; distributed_failures.cpp names the ranks behind a failure and
// leaves in order.
#include <c10/core/Event.h>
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "data_parallel.h"
#include "rank_store.h"

namespace c10d {
class ProcessGroup;
class Reducer;
class Logger;
}  // namespace c10d

namespace gputrain::parallel::detail {

constexpr int64_t kBucketBytes = 25 * 1024 * 1024;  // DistributedDataParallel's bucket_cap_mb default
constexpr int64_t kFirstBucketBytes = 1024 * 1024;  // its first bucket at that default (_DEFAULT_FIRST_BUCKET_BYTES)
// After a failed collective, how long the ranks still there wait for one
// another on the store before naming whoever did not answer. A rank still
// there answers as soon as its own collective fails, which the failing rank's
// abort makes immediate; the window is part of the job's end, which is bound
// to ddp.timeout_s + 5 s (with the launcher's grace, launcher.h).
constexpr milliseconds kRollCall{2000};
// How long the store may take to answer a request before the roll call counts it lost.
constexpr milliseconds kStoreAnswer{1000};

using Collective = std::function<c10::intrusive_ptr<c10d::Work>(std::vector<at::Tensor>&)>;

class DistributedStrategy : public SingleDeviceStrategy {
 public:
  DistributedStrategy(const StrategyPlan& plan, const LaunchInfo& launch);
  ~DistributedStrategy() override;

  std::string describe() const override;
  bool is_primary() const override { return launch_.rank == 0; }
  void prepare(torch::nn::Sequential& model, GradientSync sync) override;
  void broadcast_buffers(torch::nn::Sequential& model) override;
  data::Shard loader_shard() const override { return {launch_.rank, launch_.world_size}; }
  void log_share(const data::Batch& local) const override;
  torch::Tensor forward_to_train(torch::nn::Sequential& model, const torch::Tensor& inputs, bool last) override;
  void run_backward(const std::function<void()>& backward) override;
  void after_backward(torch::nn::Sequential& model) override;
  void sum_gradients(torch::nn::Sequential& model) override;
  void all_reduce_sum(torch::Tensor& values) override;
  void sum_across_processes(torch::Tensor& values) override;
  void max_across_processes(torch::Tensor& values) override;
  bool any_rank(bool local) override;
  StepFlags agree(StepFlags local, const torch::Tensor& step_loss) override;
  int64_t world_size() const override { return launch_.world_size; }
  std::vector<std::string> rank_hosts() const override { return rank_hosts_; }
  double collective_wait_s() const override { return collective_wait_s_; }
  torch::Tensor rows_of_every_rank(const torch::Tensor& row) override;

 private:
  c10::intrusive_ptr<c10d::Store> open_store() const;
  std::string store_name() const;
  void join() const;
  // One collective per bucket of about kBucketBytes (one dtype and device
  // each): later buckets are packed while earlier ones are on the wire.
  void bucketed(const char* what, const std::vector<torch::Tensor>& tensors, const Collective& start);
  // `tensors` take rank 0's values.
  void broadcast(const char* what, const std::vector<torch::Tensor>& tensors);
  // c10d's Reducer over the model's parameters, driven as PyTorch's
  // DistributedDataParallel drives it.
  void make_reducer(torch::nn::Sequential& model);
  // At the end of training: the Reducer's own timing of backward and its all-reduce.
  void log_reducer_stats() const;
  // agree() with a loss to check: one collective, waited for on the host.
  StepFlags agree_now(StepFlags local, const torch::Tensor& step_loss);
  // agree() without one: queues this step's collective, read by the next call.
  void queue_flags(StepFlags local);
  // The flags queued by the last step (all false when none), waiting for
  // what is left of their collective.
  StepFlags take_queued_flags();
  // Runs `body`; when c10d fails in it, names the ranks behind the failure and
  // throws DistributedError.
  void guarded(const std::string& what, const std::function<void()>& body);
  std::string roll_call();
  void finish();
  void leave_after_error();
  // Waits for `work` where its result is read on the host, failing after
  // ddp.timeout_s. NCCL work is waited for by the stream where the result
  // stays on the GPU (wait() without a timeout does not block the host;
  // with one it spins on the host until the collective is done).
  void wait_on_host(const c10::intrusive_ptr<c10d::Work>& work) const { work->wait(timeout_); }
  void wait_in_order(const c10::intrusive_ptr<c10d::Work>& work) const {
    if (nccl_) {
      work->wait();
    } else {
      work->wait(timeout_);
    }
  }

  // One step's flags on their way: the all-reduce, its result, and under
  // NCCL the pinned host copy and the event after which it is valid.
  struct QueuedFlags {
    c10::intrusive_ptr<c10d::Work> work;
    torch::Tensor flags;
    torch::Tensor mirror;
    std::optional<c10::Event> copied;
  };
  std::optional<QueuedFlags> queued_flags_;

  LaunchInfo launch_;
  bool log_replicas_;  // train.log_replicas: rank 0 logs every rank's share of each batch
  std::string backend_name_;
  milliseconds timeout_;
  std::vector<std::string> rank_names_;  // "rank 0", ...: split_batch's devices
  std::vector<std::string> rank_hosts_;  // each rank's host name, from the rendezvous
  double collective_wait_s_ = 0;         // blocked in the gradient all-reduce and the step's flags
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> group_;
  c10::intrusive_ptr<c10d::ProcessGroup> process_group_;  // group_ as the Reducer takes it
  std::shared_ptr<c10d::Reducer> reducer_;
  std::shared_ptr<c10d::Logger> reducer_logger_;
  bool syncing_ = false;  // this micro-batch's backward all-reduces
  // When the Reducer launched the backward's last bucket (its gradients were
  // the last to be ready), in steady-clock nanoseconds; what backward waited
  // for after it was communication not hidden behind the backward pass.
  std::shared_ptr<std::atomic<int64_t>> last_bucket_launch_ns_ = std::make_shared<std::atomic<int64_t>>(0);
  bool nccl_ = false;
  double bucket_cap_mb_ = 25;
  bool gradient_as_bucket_view_ = false;
  bool failed_ = false;  // a collective failed and the roll call has run
};

}  // namespace gputrain::parallel::detail
