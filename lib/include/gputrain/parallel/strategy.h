#pragma once
// How one optimizer step is spread over devices and processes. The trainer
// calls these hooks at fixed points; single, dp and ddp differ only here.
#include <torch/nn/modules/container/sequential.h>
#include <torch/types.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "gputrain/config/config.h"
#include "gputrain/data/host_loader.h"
#include "gputrain/device/resolve.h"

namespace gputrain::parallel {

enum class StrategyKind { kSingle, kDataParallel, kDistributed };

// How ddp sums a step's gradients across processes.
enum class GradientSync {
  // c10d's Reducer, bucket by bucket while backward makes them (PyTorch
  // DDP's overlap): the eager step.
  kDuringBackward,
  // sum_gradients(), called by the step once backward is done: no autograd
  // hooks and no host work, so a CUDA graph captures it with the step.
  kAfterBackward,
};

// What a launcher (gputrain --nproc, torchrun, srun) told this process, read
// from RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR and MASTER_PORT by app/.
struct LaunchInfo {
  int64_t rank = 0;
  int64_t local_rank = 0;
  int64_t world_size = 1;
  std::string master_addr = "127.0.0.1";
  int64_t master_port = 29500;
  // torchrun's agent already hosts the store at MASTER_ADDR:MASTER_PORT
  // (TORCHELASTIC_USE_AGENT_STORE): every rank joins it as a client, under a
  // prefix per restart (TORCHELASTIC_RESTART_COUNT). Otherwise rank 0 hosts it.
  bool agent_store = false;
  int64_t attempt = 0;
};

// Throws UserError for values no launcher would give: a world size below 1,
// a rank outside [0, world size), a port outside 1..65535.
void check_launch(const LaunchInfo& launch);

struct StrategyPlan {
  StrategyKind kind = StrategyKind::kSingle;
  std::vector<torch::Device> replicas;                     // dp: one per replica; else the one device
  std::string reason;                                      // why this strategy, for the log
  config::DdpBackend backend = config::DdpBackend::kGloo;  // ddp: nccl or gloo, never auto
  bool log_replicas = false;  // train.log_replicas: dp and ddp log each replica's share of a batch
  int64_t timeout_s = 300;    // ddp.timeout_s: the rendezvous and each collective
  double bucket_cap_mb = 25;  // ddp.bucket_cap_mb
  bool gradient_as_bucket_view = false;
};

// The keys a strategy is planned from.
struct StrategyKeys {
  config::StrategyName strategy = config::StrategyName::kAuto;
  config::DpConfig dp;
  config::DdpConfig ddp;
  bool log_replicas = false;  // train.log_replicas
};

// How many processes `train` runs on this machine, and why.
struct ProcessPlan {
  int64_t workers = 0;  // > 0: start this many local ddp workers (as train --nproc N); 0: train in this process
  std::string reason;   // for the run's log and `gputrain plan`
};

// The processes of a run, from the config, the selected devices, what a
// launcher said and train's --nproc (nullopt: not given). strategy: auto (or
// ddp) with several selected GPUs and no launcher starts one ddp process per
// GPU over NCCL; it never means dp, which steps eagerly (no CUDA graph) and
// sums the replicas' gradients one parameter at a time on one thread.
ProcessPlan plan_processes(config::StrategyName strategy, const device::DevicePlan& devices, const LaunchInfo& launch,
                           std::optional<int64_t> nproc);

// strategy: auto means ddp when launched with a world size above 1, else
// single (on the primary device: several GPUs get one process each from
// plan_processes, never dp). dp on the CPU runs dp.replicas CPU threads.
// Throws ConfigError, naming the key, for combinations that cannot run.
StrategyPlan plan_strategy(const StrategyKeys& keys, const device::DevicePlan& devices, const LaunchInfo& launch);

// What every rank must agree on at a step boundary; after agree(), each is
// true when it was on any rank.
struct StepFlags {
  bool stop = false;        // a stop was requested (a signal)
  bool checkpoint = false;  // a checkpoint was requested
  bool non_finite = false;  // the step's loss is inf or NaN
  bool preempt = false;     // a preemption notice (SIGUSR1): checkpoint, then stop
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string describe() const = 0;
  // Where the master weights, gathered outputs and the loss live.
  virtual torch::Device device() const = 0;
  // Only the primary process writes logs, metrics and checkpoints.
  virtual bool is_primary() const { return true; }
  // Once, before training: ddp makes every rank start from rank 0's weights
  // and sets up the gradients' sum as `sync` says.
  virtual void prepare(torch::nn::Sequential& model, GradientSync sync) {
    (void)model;
    (void)sync;
  }
  // The rows of every global batch this process loads and works on
  // (LoaderOptions::shard): all of them but under ddp, where each rank
  // loads, decodes and augments only its own share.
  virtual data::Shard loader_shard() const { return {}; }
  // ddp under train.log_replicas: rank 0 logs every rank's share of the
  // batch that `local` is this process's part of.
  virtual void log_share(const data::Batch& local) const { (void)local; }
  // The forward pass of this process's rows; dp scatters them across replicas
  // (each replica thread runs under the caller's thread-local state: grad
  // mode, autocast) and gathers the outputs on device().
  virtual torch::Tensor forward(torch::nn::Sequential& model, const torch::Tensor& inputs) = 0;
  // The same for a training micro-batch, whose backward follows before the
  // next forward pass. `last`: the optimizer step's last micro-batch. ddp
  // all-reduces the gradients during that one's backward, bucket by bucket
  // as they become ready (c10d's Reducer, as PyTorch's DDP); the earlier
  // micro-batches' gradients only accumulate (DDP's no_sync).
  virtual torch::Tensor forward_to_train(torch::nn::Sequential& model, const torch::Tensor& inputs, bool last) {
    (void)last;
    return forward(model, inputs);
  }
  // Runs a training micro-batch's backward pass (ddp names the ranks behind a
  // collective that fails in it).
  virtual void run_backward(const std::function<void()>& backward) { backward(); }
  // Once per optimizer step, after every micro-batch's backward: the model's
  // gradients are then those of the whole step (summed: each rank's loss is
  // already weighted by its share of the global batch). dp sums its
  // replicas' into the model's.
  virtual void after_backward(torch::nn::Sequential& model) { (void)model; }
  // ddp prepared with GradientSync::kAfterBackward: sums every gradient of
  // `model` across processes in place, one collective per bucket, ordered on
  // the device's stream (NCCL: the host waits for nothing, so a CUDA graph
  // captures it). A no-op for one process.
  virtual void sum_gradients(torch::nn::Sequential& model) { (void)model; }
  // ddp: every rank takes rank 0's buffers (batchnorm's running statistics,
  // which each rank otherwise updates from its own rows), as PyTorch DDP's
  // broadcast_buffers does; the trainer calls it before each evaluation and
  // checkpoint, so that the test figures and the checkpoint belong to one model.
  virtual void broadcast_buffers(torch::nn::Sequential& model) { (void)model; }
  // The model's weights were replaced outside an optimizer step (train.ema's
  // average swapped in for an evaluation, or back): dp refreshes its copies.
  virtual void weights_changed() {}
  // Sums `values` across processes in place (ddp), for metrics.
  virtual void all_reduce_sum(torch::Tensor& values) { (void)values; }
  // The same inside a training step (model.sync_batchnorm's statistics):
  // ordered on the device's stream, without waiting on the host where it can.
  virtual void sum_across_processes(torch::Tensor& values) { (void)values; }
  // The element-wise maximum over every process, in place, ordered on the
  // device's stream like sum_across_processes (train.on_nan's flag, agreed
  // before the update that reads it).
  virtual void max_across_processes(torch::Tensor& values) { (void)values; }
  // Whether `local` is true on any process: every rank calls it at the same
  // step boundaries, so all of them stop, skip or checkpoint together.
  virtual bool any_rank(bool local) { return local; }
  // Once per optimizer step: this process's flags, and `step_loss` (undefined
  // when not asked) checked for inf/NaN, agreed by every rank in one small
  // collective. With a `step_loss` that costs one device sync. Without one
  // (the loss is checked on the device), ddp waits for nothing: the
  // collective is queued on the stream and its result read at the next
  // step, so the flags returned are those raised one step earlier, on every
  // rank alike (a stop or checkpoint request takes effect one step later).
  virtual StepFlags agree(StepFlags local, const torch::Tensor& step_loss);

  // Per-rank timing (ddp): how many processes train, and where each runs
  // (host names, by rank).
  virtual int64_t world_size() const { return 1; }
  virtual std::vector<std::string> rank_hosts() const;
  // Seconds this process has been blocked on collectives so far: the part of
  // the gradient all-reduce that backward did not hide (its wait after the
  // last bucket was launched) and the step's flags.
  virtual double collective_wait_s() const { return 0; }
  // Every process's `row` (float64, on the CPU), as one [world_size, n] tensor on every process.
  virtual torch::Tensor rows_of_every_rank(const torch::Tensor& row) { return row.unsqueeze(0); }
};

std::unique_ptr<Strategy> make_strategy(const StrategyPlan& plan, const LaunchInfo& launch);

}  // namespace gputrain::parallel
