#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <c10/util/Exception.h>

#include <algorithm>

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

// Each rank still there says so on the store; whoever has not within
// kRollCall died or hangs. A rank that stopped on its own error said so too.
std::string DistributedStrategy::roll_call() {
  std::set<int64_t> missing = other_ranks(launch_);
  std::set<int64_t> failed;
  bool store_lost = false;
  const milliseconds window = std::min(timeout_, kRollCall);
  try {
    store_->set(key("alive", launch_.rank), "");
    missing = wait_for_ranks(missing, Clock::now() + window, [&](int64_t r) {
      if (store_->check({key("failed", r)})) {
        failed.insert(r);
        return true;
      }
      return store_->check({key("alive", r)});
    });
  } catch (const std::exception&) {
    store_lost = true;  // keeps whatever was seen before the store went
  }
  std::vector<std::string> parts;
  if (store_lost) {
    const bool rank0_gone = !launch_.agent_store && missing.erase(0) != 0;
    parts.push_back(fmt::format("{}{} stopped answering", rank0_gone ? "rank 0 is gone: " : "", store_name()));
  }
  if (!failed.empty()) {
    parts.push_back(fmt::format("rank {} stopped on its own error (see its log)", fmt::join(failed, ", ")));
  }
  if (!missing.empty()) {
    parts.push_back(
        fmt::format("rank {} did not answer within {} s: it died or hangs", fmt::join(missing, ", "), seconds(window)));
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
