#pragma once
// The loader's decode threads (data.decode_threads): images are decoded and
// augmented one per task, on threads apart from the batch workers, so every
// core decodes even when fewer batches are assembled at once than there are
// cores, and a batch's images finish together rather than one after another.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace gputrain::data::detail {

class DecodePool {
 public:
  // Starts `threads` threads (at least 1); a thread that cannot start is the
  // host's resource error naming data.decode_threads.
  explicit DecodePool(int64_t threads);
  ~DecodePool();  // joins the threads; no run() may be under way
  DecodePool(const DecodePool&) = delete;
  DecodePool& operator=(const DecodePool&) = delete;

  // Runs task(0) ... task(count - 1) on the pool's threads and returns when
  // all have ended; callers on several threads share the pool, first come
  // first served. The first exception a task throws is rethrown here, after
  // the call's other tasks have ended.
  void run(int64_t count, const std::function<void(int64_t)>& task);

  int64_t threads() const { return static_cast<int64_t>(threads_.size()); }

 private:
  // One caller's tasks: how many remain unclaimed and unfinished, and what failed.
  struct Call {
    const std::function<void(int64_t)>* task = nullptr;
    int64_t count = 0;
    int64_t next = 0;      // the next index to claim
    int64_t finished = 0;  // indices ended
    std::exception_ptr error;
  };

  void work();

  std::mutex mutex_;
  std::condition_variable work_cv_;  // a task to claim, or stop
  std::condition_variable done_cv_;  // a call's tasks all ended
  std::deque<Call*> calls_;          // calls with indices left to claim, oldest first
  bool stopping_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace gputrain::data::detail
