#include "rank_store.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <thread>

namespace gputrain::parallel::detail {

namespace {
constexpr milliseconds kPoll{20};
}  // namespace

std::string key(const char* what, int64_t rank) { return fmt::format("{}/{}", what, rank); }

std::string error_text(const std::exception& e) {
  const auto* torch_error = dynamic_cast<const c10::Error*>(&e);
  const std::string text = torch_error ? torch_error->what_without_backtrace() : e.what();
  return text.substr(0, text.find('\n'));
}

double seconds(milliseconds duration) { return static_cast<double>(duration.count()) / 1000.0; }

std::set<int64_t> other_ranks(const LaunchInfo& launch) {
  std::set<int64_t> others;
  for (int64_t r = 0; r < launch.world_size; ++r) {
    if (r != launch.rank) others.insert(r);
  }
  return others;
}

std::set<int64_t> wait_for_ranks(std::set<int64_t> waiting, Clock::time_point deadline,
                                 const std::function<bool(int64_t)>& arrived) {
  while (true) {
    for (auto it = waiting.begin(); it != waiting.end();) it = arrived(*it) ? waiting.erase(it) : std::next(it);
    if (waiting.empty() || Clock::now() >= deadline) return waiting;
    std::this_thread::sleep_for(kPoll);
  }
}

bool wait_for_count(c10d::Store& store, const std::string& name, int64_t target, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (store.add(name, 0) < target) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(kPoll);
  }
  return true;
}

}  // namespace gputrain::parallel::detail
