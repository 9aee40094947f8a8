#include "images/decode_pool.h"

#include <fmt/format.h>

#include "gputrain/device/host_resources.h"

namespace gputrain::data::detail {

DecodePool::DecodePool(int64_t threads) {
  try {
    for (int64_t t = 0; t < std::max<int64_t>(1, threads); ++t) threads_.emplace_back([this] { work(); });
  } catch (...) {
    const std::size_t started = threads_.size();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    work_cv_.notify_all();
    for (std::thread& thread : threads_) thread.join();
    device::rethrow_as_resource_error(
        fmt::format("starting image decode thread {} of {} (data.decode_threads)", started + 1, threads),
        "Lower data.decode_threads");
  }
}

DecodePool::~DecodePool() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& thread : threads_) thread.join();
}

void DecodePool::run(int64_t count, const std::function<void(int64_t)>& task) {
  if (count <= 0) return;
  Call call;
  call.task = &task;
  call.count = count;
  std::unique_lock<std::mutex> lock(mutex_);
  calls_.push_back(&call);
  work_cv_.notify_all();
  done_cv_.wait(lock, [&] { return call.finished == call.count; });
  lock.unlock();
  if (call.error) std::rethrow_exception(call.error);
}

void DecodePool::work() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (true) {
    work_cv_.wait(lock, [this] { return stopping_ || !calls_.empty(); });
    if (stopping_) return;
    Call& call = *calls_.front();
    const int64_t index = call.next++;
    if (call.next == call.count) calls_.pop_front();  // every index claimed: the next call's turn
    // After a failure the call's remaining tasks are skipped: their batch is lost anyway.
    const bool failed = call.error != nullptr;
    lock.unlock();
    std::exception_ptr error;
    if (!failed) {
      try {
        (*call.task)(index);
      } catch (...) {
        error = std::current_exception();
      }
    }
    lock.lock();
    if (error && !call.error) call.error = error;
    if (++call.finished == call.count) done_cv_.notify_all();
  }
}

}  // namespace gputrain::data::detail
