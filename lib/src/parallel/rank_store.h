#pragma once
// The ranks' meeting place, c10d's store: its keys, and polling it for the
// other ranks, for ddp's rendezvous, roll call and orderly exit.
#include <torch/csrc/distributed/c10d/Store.hpp>

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <set>
#include <string>

#include "gputrain/parallel/strategy.h"

namespace gputrain::parallel::detail {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// "<what>/<rank>": one rank's flag on the store.
std::string key(const char* what, int64_t rank);

// The first line of an error, without LibTorch's backtrace.
std::string error_text(const std::exception& e);

double seconds(milliseconds duration);

// Every rank of the world but this process's.
std::set<int64_t> other_ranks(const LaunchInfo& launch);

// Polls `arrived(rank)` for every rank in `waiting` until all have arrived or
// `deadline` passes; returns the ranks still missing.
std::set<int64_t> wait_for_ranks(std::set<int64_t> waiting, Clock::time_point deadline,
                                 const std::function<bool(int64_t)>& arrived);

// Waits until the counter `name` reaches `target`; false on timeout.
bool wait_for_count(c10d::Store& store, const std::string& name, int64_t target, milliseconds timeout);

}  // namespace gputrain::parallel::detail
