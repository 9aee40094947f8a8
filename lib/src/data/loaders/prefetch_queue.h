#pragma once
// An epoch's batches made by worker threads into a bounded queue and handed
// out in batch order: what HostLoader and GpuDecodeLoader share. A worker
// claims the next batch only while fewer than `prefetch` are claimed and not
// yet handed out; without workers each batch is made when it is asked for.
#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "gputrain/common/error.h"
#include "gputrain/device/host_resources.h"

namespace gputrain::data::detail {

// `Slot` is a batch or what went wrong making it: it has a member
// `std::exception_ptr error`, which `make` sets instead of throwing.
template <class Slot>
class PrefetchQueue {
 public:
  using Make = std::function<Slot(int64_t index)>;

  PrefetchQueue(int64_t workers, int64_t prefetch, int64_t batches, Make make)
      : workers_(workers),
        prefetch_(std::max<int64_t>(1, prefetch > 0 ? prefetch : 2 * workers)),
        batches_(batches),
        make_(std::move(make)) {}
  ~PrefetchQueue() { stop(); }
  PrefetchQueue(const PrefetchQueue&) = delete;
  PrefetchQueue& operator=(const PrefetchQueue&) = delete;

  // Abandons what is under way and starts the workers from batch `first`. A
  // thread that cannot start is the host's resource error naming data.num_workers.
  void start(int64_t first) {
    GPUTRAIN_CHECK(first >= 0 && first <= batches_, "batch {} of an epoch of {}", first, batches_);
    stop();
    claimed_ = first;
    delivered_ = first;
    stopping_ = false;
    worker_failure_ = nullptr;
    try {
      for (int64_t w = 0; w < workers_ && batches_ > 0; ++w) threads_.emplace_back([this] { work(); });
    } catch (...) {
      const std::size_t started = threads_.size();
      stop();
      device::rethrow_as_resource_error(
          fmt::format("starting data loader worker {} of {} (data.num_workers)", started + 1, workers_),
          "Lower data.num_workers");
    }
  }

  // Joins the workers; the epoch is over (done()) until start().
  void stop() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    for (std::thread& thread : threads_) thread.join();
    threads_.clear();
    ready_.clear();
    delivered_ = batches_;
  }

  bool done() const { return delivered_ >= batches_; }
  int64_t batches() const { return batches_; }
  int64_t prefetch() const { return prefetch_; }

  // The next batch's slot, in order (not done()); a failure that escaped a
  // worker's loop comes back as a slot holding only it.
  Slot next() {
    if (workers_ == 0) return make_(delivered_++);
    std::unique_lock<std::mutex> lock(mutex_);
    ready_cv_.wait(lock, [this] { return ready_.count(delivered_) > 0 || worker_failure_; });
    if (ready_.count(delivered_) == 0) {
      Slot failed;
      failed.error = worker_failure_;
      return failed;
    }
    auto node = ready_.extract(delivered_++);
    lock.unlock();
    work_cv_.notify_all();
    return std::move(node.mapped());
  }

 private:
  // An exception leaving a thread's function ends the process, so whatever
  // escapes the loop (the queue's own allocation failing when memory runs
  // out) is handed to the consumer instead.
  void work() {
    try {
      std::unique_lock<std::mutex> lock(mutex_);
      while (true) {
        work_cv_.wait(lock, [this] { return stopping_ || claimed_ >= batches_ || claimed_ < delivered_ + prefetch_; });
        if (stopping_ || claimed_ >= batches_) return;
        const int64_t index = claimed_++;
        lock.unlock();
        Slot slot = make_(index);
        lock.lock();
        ready_.emplace(index, std::move(slot));
        ready_cv_.notify_all();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mutex_);
      worker_failure_ = std::current_exception();
      ready_cv_.notify_all();
    }
  }

  const int64_t workers_;
  const int64_t prefetch_;
  const int64_t batches_;
  const Make make_;

  std::mutex mutex_;
  std::condition_variable work_cv_;   // a batch may be claimed, or stop
  std::condition_variable ready_cv_;  // a batch is ready
  int64_t claimed_ = 0;               // batches handed to workers
  int64_t delivered_ = 0;             // batches returned by next()
  bool stopping_ = false;
  std::map<int64_t, Slot> ready_;
  std::exception_ptr worker_failure_;
  std::vector<std::thread> threads_;
};

}  // namespace gputrain::data::detail
