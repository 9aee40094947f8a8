#include "distributed.h"

#include <c10/core/impl/VirtualGuardImpl.h>
#include <c10/util/Exception.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/distributed/c10d/comm.hpp>
#include <torch/csrc/distributed/c10d/logger.hpp>
#include <torch/csrc/distributed/c10d/reducer.hpp>

#include <chrono>
#include <exception>
#include <functional>
#include <set>
#include <tuple>

#include "c10d_backends.h"
#include "distributed_strategy.h"
#include "gputrain/common/error.h"
#include "gputrain/common/process.h"
#include "gputrain/common/strings.h"
#include "gputrain/models/freeze.h"
#include "gputrain/parallel/split.h"

namespace gputrain::parallel::detail {

namespace {
bool is_loopback(const std::string& host) { return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1"; }

int64_t parameter_bytes(const std::vector<at::Tensor>& params) {
  int64_t bytes = 0;
  for (const auto& p : params) bytes += static_cast<int64_t>(p.nbytes());
  return bytes;
}

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count();
}

// The Reducer's communication for one bucket: a summed all-reduce. PyTorch's
// default divides by the world size (an average); gputrain's ranks already
// weight their losses by their share of the global batch, so the sum is the
// gradient of one process on the whole batch. A registered hook also tells
// the Reducer not to divide.
class SumBucketHook : public c10d::CommHookInterface {
 public:
  SumBucketHook(c10::intrusive_ptr<c10d::Backend> group, std::chrono::milliseconds timeout,
                std::shared_ptr<std::atomic<int64_t>> last_launch_ns)
      : group_(std::move(group)), timeout_(timeout), last_launch_ns_(std::move(last_launch_ns)) {}

  c10::intrusive_ptr<c10::ivalue::Future> runHook(c10d::GradBucket& bucket) override {
    std::vector<at::Tensor> io{bucket.getBufferRef()};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    options.timeout = timeout_;
    if (bucket.isLast()) last_launch_ns_->store(now_ns());
    return group_->allreduce(io, options)->getFuture();
  }

  at::Tensor parseHookResult(const c10::IValue& result) override {
    return c10d::detail::parseCppCommHookResult(result);
  }

 private:
  c10::intrusive_ptr<c10d::Backend> group_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<std::atomic<int64_t>> last_launch_ns_;
};

}  // namespace

DistributedStrategy::DistributedStrategy(const StrategyPlan& plan, const LaunchInfo& launch)
    : SingleDeviceStrategy(plan.replicas.front()),
      launch_(launch),
      log_replicas_(plan.log_replicas),
      backend_name_(config::word(plan.backend)),
      timeout_(std::chrono::seconds(plan.timeout_s)),
      nccl_(plan.backend == config::DdpBackend::kNccl),
      bucket_cap_mb_(plan.bucket_cap_mb),
      gradient_as_bucket_view_(plan.gradient_as_bucket_view) {
  for (int64_t r = 0; r < launch_.world_size; ++r) rank_names_.push_back(fmt::format("rank {}", r));
  const auto start = Clock::now();
  store_ = open_store();
  join();
  for (int64_t r = 0; r < launch_.world_size; ++r) rank_hosts_.push_back(store_->get_to_str(key("host", r)));
  BackendOptions options;
  options.store = c10::make_intrusive<c10d::PrefixStore>("pg", store_);
  options.rank = static_cast<int>(launch_.rank);
  options.size = static_cast<int>(launch_.world_size);
  options.timeout = timeout_;
  options.loopback = is_loopback(launch_.master_addr);
  options.cuda_device = device().is_cuda() ? device().index() : 0;
  guarded("setting up the " + backend_name_ + " process group",
          [&] { group_ = nccl_ ? make_nccl_backend(options) : make_gloo_backend(options); });
  // The Reducer talks to a ProcessGroup: ours, with this one backend for the device it trains on.
  const auto type = nccl_ ? c10d::ProcessGroup::BackendType::NCCL : c10d::ProcessGroup::BackendType::GLOO;
  process_group_ = c10::make_intrusive<c10d::ProcessGroup>(options.store, options.rank, options.size);
  process_group_->setDefaultBackend(type);
  process_group_->setBackend(device().type(), type, group_);
  spdlog::info("ddp: rank {} of {} joined through {}:{} in {:.1f} s; {} collectives, timeout {} s", launch_.rank,
               launch_.world_size, launch_.master_addr, launch_.master_port,
               std::chrono::duration<double>(Clock::now() - start).count(), backend_name_, plan.timeout_s);
}

DistributedStrategy::~DistributedStrategy() {
  try {
    if (!failed_ && std::uncaught_exceptions() == 0) log_reducer_stats();
    reducer_logger_.reset();  // before the Reducer, as PyTorch's DDP orders them
    reducer_.reset();
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
    store_->set(key("host", rank), host_name());  // before "world", which the others wait for
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

void DistributedStrategy::prepare(torch::nn::Sequential& model, GradientSync sync) {
  std::vector<torch::Tensor> tensors = model->parameters();
  for (const auto& buffer : model->buffers()) tensors.push_back(buffer);
  broadcast("broadcasting rank 0's initial weights", tensors);
  if (sync == GradientSync::kDuringBackward) return make_reducer(model);
  std::vector<torch::Tensor> trainable;
  for (const auto& named : models::trainable_parameters(*model)) trainable.push_back(named.second);
  spdlog::info("ddp: the step sums {} of gradients after backward, one all-reduce per {} bucket ({})",
               bytes_text(parameter_bytes(trainable)), bytes_text(kBucketBytes),
               nccl_ ? "captured with the step in its CUDA graph" : "waited for on the host");
}

void DistributedStrategy::sum_gradients(torch::nn::Sequential& model) {
  std::vector<torch::Tensor> grads;
  for (const auto& p : model->parameters()) {
    if (p.grad().defined()) grads.push_back(p.mutable_grad());
  }
  // Summed, as the Reducer's hook does: each rank's loss is already weighted by its share of the global batch.
  bucketed("all-reducing the gradients", grads, [this](std::vector<at::Tensor>& io) {
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    return group_->allreduce(io, options);
  });
}

// Rank 0's rather than the ranks' average: the same choice as DDP, and the
// checkpoint (written by rank 0) holds exactly what every rank evaluates with.
// Once per evaluation and checkpoint, not per forward as DDP: training with
// per-rank running statistics changes nothing, since train mode normalises
// with the batch's own statistics.
void DistributedStrategy::broadcast_buffers(torch::nn::Sequential& model) {
  broadcast("broadcasting rank 0's buffers (batchnorm's running statistics)", model->buffers());
}

void DistributedStrategy::broadcast(const char* what, const std::vector<torch::Tensor>& tensors) {
  if (tensors.empty()) return;
  torch::NoGradGuard no_grad;
  bucketed(what, tensors, [this](std::vector<at::Tensor>& io) {
    c10d::BroadcastOptions options;
    options.rootRank = 0;
    return group_->broadcast(io, options);
  });
}

void DistributedStrategy::make_reducer(torch::nn::Sequential& model) {
  std::vector<at::Tensor> params;
  std::unordered_map<size_t, std::string> names;
  // model.freeze: the Reducer waits for a gradient of every parameter it holds, so it holds only those that train.
  for (const auto& [name, param] : models::trainable_parameters(*model)) {
    names[params.size()] = name;
    params.push_back(param);
  }
  const auto cap = static_cast<int64_t>(bucket_cap_mb_ * 1024 * 1024);
  // As DistributedDataParallel: a small first bucket only at the default cap.
  const int64_t first = cap == kBucketBytes ? kFirstBucketBytes : cap;
  const std::vector<bool> sparse(params.size(), false);
  // Named variables, not a structured binding: the lambda below captures them.
  std::vector<std::vector<size_t>> buckets;
  std::vector<size_t> limits;
  std::tie(buckets, limits) =
      c10d::compute_bucket_assignment_by_size(params, {static_cast<size_t>(first), static_cast<size_t>(cap)}, sparse);
  // The last layers' gradients are ready first: their bucket goes first.
  std::reverse(buckets.begin(), buckets.end());
  std::reverse(limits.begin(), limits.end());
  guarded("setting up c10d's Reducer", [&] {
    reducer_ = std::make_shared<c10d::Reducer>(params, buckets, process_group_, sparse, cap,
                                               /*find_unused_parameters=*/false, gradient_as_bucket_view_, names, first,
                                               /*skip_all_reduce_unused_params=*/false, /*use_python_reducer=*/false,
                                               std::vector<int64_t>(limits.begin(), limits.end()));
    reducer_->register_comm_hook(std::make_unique<SumBucketHook>(group_, timeout_, last_bucket_launch_ns_));
    reducer_logger_ = std::make_shared<c10d::Logger>(reducer_);
    reducer_->set_logger(reducer_logger_);
  });
  spdlog::info("ddp: c10d's Reducer all-reduces {} of gradients in {} during backward (ddp.bucket_cap_mb {:g}{}){}",
               bytes_text(parameter_bytes(params)), count_of(static_cast<int64_t>(buckets.size()), "bucket"),
               bucket_cap_mb_, cap == kBucketBytes ? ", the first 1 MiB" : "",
               gradient_as_bucket_view_ ? "; gradients are views into the buckets" : "");
}

torch::Tensor DistributedStrategy::forward_to_train(torch::nn::Sequential& model, const torch::Tensor& inputs,
                                                    bool last) {
  GPUTRAIN_CHECK(reducer_ != nullptr, "prepare() builds the Reducer before the first training step");
  syncing_ = last;
  // As DistributedDataParallel's forward: under no_sync (the accumulation's
  // earlier micro-batches) the Reducer expects no backward hooks.
  if (last) {
    reducer_logger_->set_runtime_stats_and_log();
    reducer_->prepare_for_forward();
  }
  guarded("rebuilding the gradient buckets in the order backward fills them", [&] { reducer_->rebuild_buckets(); });
  torch::Tensor outputs = forward(model, inputs);
  if (last) reducer_->prepare_for_backward({});
  return outputs;
}

void DistributedStrategy::run_backward(const std::function<void()>& backward) {
  if (!syncing_) return backward();
  guarded("all-reducing the gradients", backward);
}

void DistributedStrategy::log_reducer_stats() const {
  if (!reducer_logger_ || !is_primary()) return;
  const at::DDPLoggingData data = reducer_logger_->get_ddp_logging_data();
  const auto ms = [&](const char* key) {
    const auto it = data.ints_map.find(key);
    return it == data.ints_map.end() ? 0.0 : static_cast<double>(it->second) / 1e6;
  };
  const double comm = ms("avg_backward_comm_time"), overlap = ms("avg_backward_compute_comm_overlap_time");
  if (comm <= 0) return;
  spdlog::info(
      "ddp: Reducer timing (PyTorch DDP's runtime stats, sampled steps): backward {:.3f} ms, its all-reduce {:.3f} "
      "ms, of which {:.3f} ms ({:.0f}%) overlapped backward",
      ms("avg_backward_compute_time"), comm, overlap, 100 * std::min(1.0, overlap / comm));
}

// A batch too small to reach a rank leaves it no rows; it still takes part in
// every collective, with zero gradients.
void DistributedStrategy::log_share(const data::Batch& local) const {
  if (!log_replicas_ || !is_primary()) return;
  std::vector<std::string> shares;
  for (const ReplicaSplit& s : split_batch(local.global_size(), rank_names_))
    shares.push_back(fmt::format("rank {} rows [{},{}) n={}", s.replica, s.begin, s.end, s.rows()));
  spdlog::info("ddp: batch of {} over {}: {}", local.global_size(), count_of(launch_.world_size, "rank"),
               fmt::join(shares, "; "));
}

void DistributedStrategy::after_backward(torch::nn::Sequential& model) {
  (void)model;  // the Reducer summed the gradients during the last backward
  // What backward waited for after its last bucket was launched: the
  // all-reduce not hidden behind it.
  const int64_t launched = last_bucket_launch_ns_->exchange(0);
  if (launched > 0) collective_wait_s_ += std::max<int64_t>(0, now_ns() - launched) / 1e9;
}

torch::Tensor DistributedStrategy::rows_of_every_rank(const torch::Tensor& row) {
  torch::Tensor rows = torch::zeros({launch_.world_size, row.numel()}, torch::kFloat64);
  rows[launch_.rank].copy_(row.reshape({-1}));
  rows = rows.to(device());
  std::vector<at::Tensor> io{rows};
  guarded("gathering every rank's timing", [&] { wait_on_host(group_->allreduce(io)); });
  return io.front().cpu();
}

void DistributedStrategy::all_reduce_sum(torch::Tensor& values) {
  std::vector<at::Tensor> io{values};
  guarded("summing metrics", [&] { wait_on_host(group_->allreduce(io)); });
}

void DistributedStrategy::sum_across_processes(torch::Tensor& values) {
  std::vector<at::Tensor> io{values};
  guarded("summing batchnorm statistics (model.sync_batchnorm)", [&] { wait_in_order(group_->allreduce(io)); });
}

namespace {
// An all-reduce that keeps each element's largest value: a flag raised on any rank is raised on all.
c10d::AllreduceOptions maximum() {
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::MAX;
  return options;
}
// [stop, checkpoint, non-finite, preempt] as int32, the order agree() reads them back.
torch::Tensor flag_row(const StepFlags& local) {
  return torch::tensor({local.stop ? 1 : 0, local.checkpoint ? 1 : 0, 0, local.preempt ? 1 : 0}, torch::kInt32);
}
StepFlags read_flag_row(const torch::Tensor& host) {
  const int32_t* agreed = host.const_data_ptr<int32_t>();
  return {agreed[0] != 0, agreed[1] != 0, agreed[2] != 0, agreed[3] != 0};
}
StepFlags either(const StepFlags& a, const StepFlags& b) {
  return {a.stop || b.stop, a.checkpoint || b.checkpoint, a.non_finite || b.non_finite, a.preempt || b.preempt};
}
}  // namespace

bool DistributedStrategy::any_rank(bool local) {
  const auto options_int = torch::TensorOptions().dtype(torch::kInt32).device(device());
  std::vector<at::Tensor> io{torch::full({1}, local ? 1 : 0, options_int)};
  guarded("agreeing across ranks", [&] { wait_on_host(group_->allreduce(io, maximum())); });
  return io.front().item<int32_t>() != 0;
}

void DistributedStrategy::max_across_processes(torch::Tensor& values) {
  std::vector<at::Tensor> io{values};
  guarded("agreeing whether the step's loss is finite", [&] { wait_in_order(group_->allreduce(io, maximum())); });
}

StepFlags DistributedStrategy::agree(StepFlags local, const torch::Tensor& step_loss) {
  if (step_loss.defined()) return agree_now(local, step_loss);
  const StepFlags previous = take_queued_flags();
  queue_flags(local);
  return previous;
}

StepFlags DistributedStrategy::agree_now(StepFlags local, const torch::Tensor& step_loss) {
  const StepFlags queued = take_queued_flags();  // none in a run that always checks its loss here
  torch::Tensor flags = flag_row(local).to(device());
  flags[2].copy_(step_loss.isfinite().logical_not());  // on the device: no sync here
  std::vector<at::Tensor> io{flags};
  const auto start = Clock::now();
  guarded("agreeing on the step's flags", [&] { wait_on_host(group_->allreduce(io, maximum())); });
  const torch::Tensor host = io.front().cpu();
  collective_wait_s_ += std::chrono::duration<double>(Clock::now() - start).count();
  return either(queued, read_flag_row(host));
}

void DistributedStrategy::queue_flags(StepFlags local) {
  QueuedFlags q;
  // Pinned, so the copy to the GPU is queued on the stream, not made by the host.
  q.flags = nccl_ ? flag_row(local).pin_memory().to(device(), /*non_blocking=*/true) : flag_row(local);
  std::vector<at::Tensor> io{q.flags};
  guarded("agreeing on the step's flags", [&] {
    q.work = group_->allreduce(io, maximum());
    if (!nccl_) return;     // Gloo's result is read when its work is done
    wait_in_order(q.work);  // the stream waits, not the host
    q.mirror = torch::empty({4}, torch::TensorOptions().dtype(torch::kInt32).pinned_memory(true));
    q.mirror.copy_(q.flags, /*non_blocking=*/true);
    const c10::impl::VirtualGuardImpl cuda(c10::DeviceType::CUDA);
    q.copied.emplace(c10::DeviceType::CUDA);
    q.copied->record(cuda.getStream(device()));
  });
  queued_flags_ = std::move(q);
}

StepFlags DistributedStrategy::take_queued_flags() {
  if (!queued_flags_) return {};
  QueuedFlags q = std::move(*queued_flags_);
  queued_flags_.reset();
  const auto start = Clock::now();
  // A step later the collective is done, or nearly: a wait here is what is
  // left of it, not a round trip.
  guarded("agreeing on the step's flags", [&] {
    if (q.copied) {
      q.copied->synchronize();
    } else {
      wait_on_host(q.work);
    }
  });
  collective_wait_s_ += std::chrono::duration<double>(Clock::now() - start).count();
  return read_flag_row(q.copied ? q.mirror : q.flags);
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
