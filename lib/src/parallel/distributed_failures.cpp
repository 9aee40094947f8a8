#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <c10/util/Exception.h>

#include <algorithm>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>

#include "distributed_strategy.h"
#include "gputrain/common/error.h"

namespace gputrain::parallel::detail {

void DistributedStrategy::guarded(const std::string& what, const std::function<void()>& body) {
  try {
    body();
  } catch (const Error&) {
    throw;
  } catch (const c10::OutOfMemoryError&) {
    throw;  // not a collective's failure: the trainer says what to change
  } catch (const std::exception& e) {
    // Abort first: NCCL peers blocked in this collective fail now, not at
    // the watchdog's timeout.
    if (group_) group_->abort();
    const std::string who = roll_call();
    failed_ = true;
    throw DistributedError(
        fmt::format("rank {}: {} failed: {} ({}: {})", launch_.rank, what, who, backend_name_, error_text(e)));
  }
}

namespace {

struct RollCall {
  std::set<int64_t> missing;
  std::set<int64_t> failed;
  bool store_lost = false;
};

// What the roll call's thread has seen so far, for the thread that waits on it.
struct RollCallProgress {
  std::mutex mutex;
  std::condition_variable changed;
  bool store_answered = false;
  std::optional<RollCall> done;
};

}  // namespace

// Each rank still there says so on the store; whoever has not within
// kRollCall died or hangs. A rank that stopped on its own error said so too.
// TCPStore's reads wait without a timeout of their own when the store's host
// is stopped (rank 0 under SIGSTOP), so the roll call runs on a thread of its
// own, holding its own reference to the store, and this one stops waiting for
// it when the store does not answer its first request within kStoreAnswer, or
// the roll call is not over within its window: the store is then lost.
std::string DistributedStrategy::roll_call() {
  const milliseconds window = std::min(timeout_, kRollCall);
  const std::set<int64_t> others = other_ranks(launch_);
  auto progress = std::make_shared<RollCallProgress>();
  std::thread([store = store_, rank = launch_.rank, others, window, progress] {
    RollCall seen{others, {}, false};
    const auto answered = [&](bool present) {
      const std::lock_guard<std::mutex> lock(progress->mutex);
      progress->store_answered = true;
      progress->changed.notify_all();
      return present;
    };
    try {
      store->set(key("alive", rank), "");
      seen.missing = wait_for_ranks(others, Clock::now() + window, [&](int64_t r) {
        if (answered(store->check({key("failed", r)}))) {
          seen.failed.insert(r);
          return true;
        }
        return answered(store->check({key("alive", r)}));
      });
    } catch (const std::exception&) {
      seen.store_lost = true;  // keeps whatever was seen before the store went
    }
    const std::lock_guard<std::mutex> lock(progress->mutex);
    progress->done = std::move(seen);
    progress->changed.notify_all();
  }).detach();
  RollCall seen{others, {}, true};
  {
    std::unique_lock<std::mutex> lock(progress->mutex);
    const bool store_there = progress->changed.wait_for(
        lock, std::min(window, kStoreAnswer), [&] { return progress->store_answered || progress->done.has_value(); });
    if (store_there &&
        progress->changed.wait_for(lock, window + kStoreAnswer, [&] { return progress->done.has_value(); })) {
      seen = *progress->done;
    }
  }

  std::vector<std::string> parts;
  if (seen.store_lost) {
    const bool rank0_gone = !launch_.agent_store && seen.missing.erase(0) != 0;
    parts.push_back(fmt::format("{}{} stopped answering", rank0_gone ? "rank 0 is gone: " : "", store_name()));
  }
  if (!seen.failed.empty()) {
    parts.push_back(fmt::format("rank {} stopped on its own error (see its log)", fmt::join(seen.failed, ", ")));
  }
  if (!seen.missing.empty()) {
    parts.push_back(fmt::format("rank {} did not answer within {} s: it died or hangs", fmt::join(seen.missing, ", "),
                                seconds(window)));
  }
  if (parts.empty()) parts.push_back("every rank is still there; see their logs");
  return fmt::format("{}", fmt::join(parts, "; "));
}

// Nobody tears its connections down before every rank is done with its last
// collective, and rank 0, which hosts the store, leaves last.
void DistributedStrategy::finish() {
  store_->add("finished", 1);
  if (!wait_for_count(*store_, "finished", launch_.world_size, timeout_)) {
    spdlog::warn("rank {}: not every rank finished within {} s", launch_.rank, seconds(timeout_));
    return;
  }
  group_->shutdown();  // NCCL's orderly exit: without it, its destructor warns and may hang
  store_->add("left", 1);
  if (launch_.rank == 0) wait_for_count(*store_, "left", launch_.world_size, timeout_);
}

// This rank failed outside a collective: it says so on the store and closes
// its connections at once, so the others fail their next collective now
// rather than at the timeout, and can name it.
void DistributedStrategy::leave_after_error() {
  store_->set(key("failed", launch_.rank), "");
  group_->abort();
  group_.reset();
  if (launch_.rank != 0 || launch_.agent_store) return;  // nobody else needs this process's store
  wait_for_ranks(other_ranks(launch_), Clock::now() + std::min(timeout_, kRollCall),
                 [&](int64_t r) { return store_->check({key("alive", r)}) || store_->check({key("failed", r)}); });
}

}  // namespace gputrain::parallel::detail
