#pragma once
// ddp's strategy: distributed.cpp joins the ranks and runs the collectives of
// a step; distributed_failures.cpp names the ranks behind a failure and
// leaves in order.
#include <torch/csrc/distributed/c10d/Backend.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <functional>
#include <string>
#include <vector>

#include "data_parallel.h"
#include "rank_store.h"

namespace gputrain::parallel::detail {

constexpr int64_t kBucketBytes = 25 * 1024 * 1024;  // DistributedDataParallel's bucket_cap_mb
// After a failed collective, how long the ranks still there wait for one
// another on the store before naming whoever did not answer.
constexpr milliseconds kRollCall{3000};

using Collective = std::function<c10::intrusive_ptr<c10d::Work>(std::vector<at::Tensor>&)>;

class DistributedStrategy : public SingleDeviceStrategy {
 public:
  DistributedStrategy(const StrategyPlan& plan, const LaunchInfo& launch);
  ~DistributedStrategy() override;

  std::string describe() const override;
  bool is_primary() const override { return launch_.rank == 0; }
  void prepare(torch::nn::Sequential& model) override;
  data::Batch local_part(const data::Batch& batch) const override;
  void after_backward(torch::nn::Sequential& model) override;
  void all_reduce_sum(torch::Tensor& values) override;
  void sum_across_processes(torch::Tensor& values) override;
  bool any_rank(bool local) override;
  StepFlags agree(StepFlags local, const torch::Tensor& step_loss) override;

 private:
  c10::intrusive_ptr<c10d::Store> open_store() const;
  std::string store_name() const;
  void join() const;
  // One collective per bucket of about kBucketBytes (one dtype and device
  // each): later buckets are packed while earlier ones are on the wire.
  void bucketed(const char* what, const std::vector<torch::Tensor>& tensors, const Collective& start);
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

  LaunchInfo launch_;
  bool log_replicas_;  // train.log_replicas: rank 0 logs every rank's share of each batch
  std::string backend_name_;
  milliseconds timeout_;
  std::vector<std::string> rank_names_;  // "rank 0", ...: split_batch's devices
  c10::intrusive_ptr<c10d::Store> store_;
  c10::intrusive_ptr<c10d::Backend> group_;
  bool nccl_ = false;
  bool failed_ = false;  // a collective failed and the roll call has run
};

}  // namespace gputrain::parallel::detail
