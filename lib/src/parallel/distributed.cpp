#include "distributed.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <set>

#include "c10d_backends.h"
#include "distributed_strategy.h"
#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"
#include "gputrain/parallel/split.h"

namespace gputrain::parallel::detail {

namespace {
bool is_loopback(const std::string& host) { return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1"; }
}  // namespace

DistributedStrategy::DistributedStrategy(const StrategyPlan& plan, const LaunchInfo& launch)
    : SingleDeviceStrategy(plan.replicas.front()),
      launch_(launch),
      log_replicas_(plan.log_replicas),
      backend_name_(config::word(plan.backend)),
      timeout_(std::chrono::seconds(plan.timeout_s)),
      nccl_(plan.backend == config::DdpBackend::kNccl) {
  for (int64_t r = 0; r < launch_.world_size; ++r) rank_names_.push_back(fmt::format("rank {}", r));
  const auto start = Clock::now();
  store_ = open_store();
  join();
  BackendOptions options;
  options.store = c10::make_intrusive<c10d::PrefixStore>("pg", store_);
  options.rank = static_cast<int>(launch_.rank);
  options.size = static_cast<int>(launch_.world_size);
  options.timeout = timeout_;
  options.loopback = is_loopback(launch_.master_addr);
  options.cuda_device = device().is_cuda() ? device().index() : 0;
  guarded("setting up the " + backend_name_ + " process group",
          [&] { group_ = nccl_ ? make_nccl_backend(options) : make_gloo_backend(options); });
  spdlog::info("ddp: rank {} of {} joined through {}:{} in {:.1f} s; {} collectives, timeout {} s", launch_.rank,
               launch_.world_size, launch_.master_addr, launch_.master_port,
               std::chrono::duration<double>(Clock::now() - start).count(), backend_name_, plan.timeout_s);
}

DistributedStrategy::~DistributedStrategy() {
  try {
    if (!failed_) {
      if (std::uncaught_exceptions() > 0) {
        leave_after_error();
      } else {
        finish();
      }
    }
  } catch (const std::exception& e) {
    spdlog::warn("rank {}: leaving the process group: {}", launch_.rank, error_text(e));
  }
}

std::string DistributedStrategy::describe() const {
  return fmt::format("distributed data-parallel, rank {} of {} on {} ({})", launch_.rank, launch_.world_size,
                     device().str(), backend_name_);
}

c10::intrusive_ptr<c10d::Store> DistributedStrategy::open_store() const {
  c10d::TCPStoreOptions options;
  options.port = static_cast<std::uint16_t>(launch_.master_port);
  options.isServer = launch_.rank == 0 && !launch_.agent_store;
  options.numWorkers = static_cast<std::size_t>(launch_.world_size);
  options.waitWorkers = false;  // join() waits instead, and names who is missing
  options.timeout = timeout_;
  try {
    // Keys of an earlier attempt may still be in torchrun's store.
    return c10::make_intrusive<c10d::PrefixStore>(fmt::format("gputrain/attempt_{}", launch_.attempt),
                                                  c10::make_intrusive<c10d::TCPStore>(launch_.master_addr, options));
  } catch (const std::exception& e) {
    if (options.isServer) {
      throw DistributedError(fmt::format(
          "rank 0: cannot host the rendezvous store on port {} ({}); is the port in use by another run? Set "
          "MASTER_PORT to a free port (gputrain train --nproc picks one when MASTER_PORT is unset)",
          launch_.master_port, error_text(e)));
    }
    throw DistributedError(
        fmt::format("rank {}: cannot reach {} within {} s ({}); check that it runs and that "
                    "MASTER_ADDR and MASTER_PORT point at it",
                    launch_.rank, store_name(), seconds(timeout_), error_text(e)));
  }
}

std::string DistributedStrategy::store_name() const {
  return fmt::format("the rendezvous store {} at {}:{}", launch_.agent_store ? "of torchrun's agent" : "of rank 0",
                     launch_.master_addr, launch_.master_port);
}

// Every rank registers its world size and waits for all the others, so a
// rank that never comes is named, as is one started with another WORLD_SIZE.
void DistributedStrategy::join() const {
  const int64_t rank = launch_.rank;
  const std::string world = std::to_string(launch_.world_size);
  std::set<int64_t> missing;
  try {
    if (store_->add(key("joined", rank), 1) != 1) {
      throw DistributedError(
          fmt::format("rank {}: another process has already joined as rank {}; every process "
                      "needs its own RANK",
                      rank, rank));
    }
    store_->set(key("world", rank), world);
    missing = wait_for_ranks(other_ranks(launch_), Clock::now() + timeout_, [&](int64_t r) {
      if (!store_->check({key("world", r)})) return false;
      const std::string theirs = store_->get_to_str(key("world", r));
      if (theirs != world) {
        throw DistributedError(
            fmt::format("rank {} was started with WORLD_SIZE={} but rank {} with WORLD_SIZE={}; "
                        "every process must get the same WORLD_SIZE",
                        r, theirs, rank, world));
      }
      return true;
    });
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    throw DistributedError(
        fmt::format("rank {}: {} stopped answering during the rendezvous ({})", rank, store_name(), error_text(e)));
  }
  if (!missing.empty()) {
    throw DistributedError(
        fmt::format("rank {}: rendezvous at {}:{} timed out after {} s (ddp.timeout_s): rank {} "
                    "did not join; start every rank with the same MASTER_ADDR, MASTER_PORT and "
                    "WORLD_SIZE={}",
                    rank, launch_.master_addr, launch_.master_port, seconds(timeout_), fmt::join(missing, ", "),
                    launch_.world_size));
  }
}

void DistributedStrategy::prepare(torch::nn::Sequential& model) {
  torch::NoGradGuard no_grad;
  std::vector<torch::Tensor> tensors = model->parameters();
  for (const auto& buffer : model->buffers()) tensors.push_back(buffer);
  bucketed("broadcasting rank 0's initial weights", tensors, [this](std::vector<at::Tensor>& io) {
    c10d::BroadcastOptions options;
    options.rootRank = 0;
    return group_->broadcast(io, options);
  });
}

data::Batch DistributedStrategy::local_part(const data::Batch& batch) const {
  // A batch too small to reach this rank leaves it no rows; it still takes
  // part in every collective, with zero gradients.
  int64_t begin = batch.size();
  int64_t end = begin;
  const std::vector<ReplicaSplit> splits = split_batch(batch.size(), rank_names_);
  for (const ReplicaSplit& split : splits) {
    if (split.replica == launch_.rank) {
      begin = split.begin;
      end = split.end;
    }
  }
  if (log_replicas_ && is_primary()) {
    std::vector<std::string> shares;
    for (const ReplicaSplit& s : splits)
      shares.push_back(fmt::format("rank {} rows [{},{}) n={}", s.replica, s.begin, s.end, s.rows()));
    spdlog::info("ddp: batch of {} over {}: {}", batch.size(), count_of(launch_.world_size, "rank"),
                 fmt::join(shares, "; "));
  }
  data::Batch part = batch;
  part.inputs = batch.inputs.slice(0, begin, end);
  if (batch.targets.defined()) part.targets = batch.targets.slice(0, begin, end);
  return part;
}

void DistributedStrategy::after_backward(torch::nn::Sequential& model) {
  std::vector<torch::Tensor> grads;
  for (auto& p : model->parameters()) {
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
    grads.push_back(p.grad());
  }
  // Summed, not averaged: each rank's loss is already divided by the global
  // batch, so the sum is the gradient of one process on the whole batch.
  // This runs after the last micro-batch's backward: under accumulation a
  // gradient hook cannot tell that backward from the others, so communication
  // overlaps other buckets' packing, not the backward pass.
  bucketed("all-reducing the gradients", grads, [this](std::vector<at::Tensor>& io) {
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    return group_->allreduce(io, options);
  });
}

void DistributedStrategy::all_reduce_sum(torch::Tensor& values) {
  std::vector<at::Tensor> io{values};
  guarded("summing metrics", [&] { wait_on_host(group_->allreduce(io)); });
}

void DistributedStrategy::sum_across_processes(torch::Tensor& values) {
  std::vector<at::Tensor> io{values};
  guarded("summing batchnorm statistics (model.sync_batchnorm)", [&] { wait_in_order(group_->allreduce(io)); });
}

bool DistributedStrategy::any_rank(bool local) {
  const auto options_int = torch::TensorOptions().dtype(torch::kInt32).device(device());
  std::vector<at::Tensor> io{torch::full({1}, local ? 1 : 0, options_int)};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  guarded("agreeing across ranks", [&] { wait_on_host(group_->allreduce(io, options)); });
  return io.front().item<int32_t>() != 0;
}

StepFlags DistributedStrategy::agree(StepFlags local, const torch::Tensor& step_loss) {
  const auto options_int = torch::TensorOptions().dtype(torch::kInt32).device(device());
  torch::Tensor flags = torch::tensor({local.stop ? 1 : 0, local.checkpoint ? 1 : 0, 0}, torch::kInt32).to(options_int);
  if (step_loss.defined()) flags[2].copy_(step_loss.isfinite().logical_not());  // on the device: no sync here
  std::vector<at::Tensor> io{flags};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  guarded("agreeing on the step's flags", [&] { wait_on_host(group_->allreduce(io, options)); });
  const torch::Tensor host = io.front().cpu();
  const int32_t* agreed = host.data_ptr<int32_t>();
  return {agreed[0] != 0, agreed[1] != 0, agreed[2] != 0};
}

void DistributedStrategy::bucketed(const char* what, const std::vector<torch::Tensor>& tensors,
                                   const Collective& start) {
  std::vector<std::vector<torch::Tensor>> buckets;
  int64_t bytes = 0;
  for (const auto& t : tensors) {
    const bool fits = !buckets.empty() && buckets.back().front().dtype() == t.dtype() &&
                      buckets.back().front().device() == t.device() && bytes + t.nbytes() <= kBucketBytes;
    if (!fits) {
      buckets.emplace_back();
      bytes = 0;
    }
    buckets.back().push_back(t);
    bytes += static_cast<int64_t>(t.nbytes());
  }
  std::vector<std::vector<at::Tensor>> flats;
  guarded(what, [&] {
    std::vector<c10::intrusive_ptr<c10d::Work>> works;
    for (const auto& bucket : buckets) {
      std::vector<torch::Tensor> pieces;
      for (const auto& t : bucket) pieces.push_back(t.reshape({-1}));
      flats.push_back({torch::cat(pieces)});
      works.push_back(start(flats.back()));
    }
    for (const auto& work : works) wait_in_order(work);
  });
  torch::NoGradGuard no_grad;
  for (std::size_t b = 0; b < buckets.size(); ++b) {
    int64_t offset = 0;
    for (auto& t : buckets[b]) {
      t.copy_(flats[b].front().narrow(0, offset, t.numel()).view_as(t));
      offset += t.numel();
    }
  }
}

std::unique_ptr<Strategy> make_distributed_strategy(const StrategyPlan& plan, const LaunchInfo& launch) {
  return std::make_unique<DistributedStrategy>(plan, launch);
}

}  // namespace gputrain::parallel::detail
