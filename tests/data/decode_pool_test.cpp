// The loader's decode threads (data.decode_threads): every task of a call runs
// once, calls from several batch workers share the threads, and a task's
// failure reaches its own caller only.
#include "images/decode_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

namespace gputrain::data::detail {
namespace {

TEST(DecodePool, EachTaskOfEachCallRunsOnceOnThePoolsThreads) {
  DecodePool pool(3);
  EXPECT_EQ(pool.threads(), 3);
  const std::thread::id caller = std::this_thread::get_id();
  std::vector<std::atomic<int>> runs(100);
  std::atomic<bool> on_caller{false};
  pool.run(100, [&](int64_t i) {
    ++runs[static_cast<std::size_t>(i)];
    if (std::this_thread::get_id() == caller) on_caller = true;
  });
  for (const auto& n : runs) EXPECT_EQ(n.load(), 1);
  EXPECT_FALSE(on_caller.load());
  pool.run(0, [](int64_t) { ADD_FAILURE() << "a call of no tasks ran one"; });
}

TEST(DecodePool, WorkersShareThePoolAndEachGetsItsOwnResults) {
  DecodePool pool(2);
  std::vector<std::vector<int64_t>> results(4, std::vector<int64_t>(50, -1));
  std::vector<std::thread> workers;
  for (std::size_t w = 0; w < results.size(); ++w) {
    workers.emplace_back([&, w] {
      for (int round = 0; round < 5; ++round) {
        pool.run(50, [&](int64_t i) { results[w][static_cast<std::size_t>(i)] = static_cast<int64_t>(w) * 1000 + i; });
      }
    });
  }
  for (std::thread& t : workers) t.join();
  for (std::size_t w = 0; w < results.size(); ++w) {
    for (int64_t i = 0; i < 50; ++i)
      EXPECT_EQ(results[w][static_cast<std::size_t>(i)], static_cast<int64_t>(w) * 1000 + i);
  }
}

TEST(DecodePool, AFailingTaskIsRethrownToItsCallerAfterItsOtherTasksEnd) {
  DecodePool pool(2);
  std::atomic<int> running{0};
  try {
    pool.run(40, [&](int64_t i) {
      ++running;
      if (i == 7) {
        --running;
        throw std::runtime_error("image 7 is corrupt");
      }
      --running;
    });
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_STREQ(e.what(), "image 7 is corrupt");
    EXPECT_EQ(running.load(), 0);  // nothing of the call still runs
  }
  // The pool goes on serving.
  std::atomic<int> done{0};
  pool.run(10, [&](int64_t) { ++done; });
  EXPECT_EQ(done.load(), 10);
}

}  // namespace
}  // namespace gputrain::data::detail
