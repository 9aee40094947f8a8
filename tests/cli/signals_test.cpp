// Where the stop and checkpoint signals land: on a thread of their own, never
// on the thread that trains or one it started (a signal there can interrupt a
// system call inside CUDA: exit code 4 on an H100).
#include "signals.h"

#include <gtest/gtest.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <thread>

namespace gputrain::app {
namespace {

bool blocks(int signal) {
  sigset_t mask;
  pthread_sigmask(SIG_SETMASK, nullptr, &mask);
  return sigismember(&mask, signal) == 1;
}

template <typename Predicate>
bool within_five_seconds(Predicate done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}

std::atomic<bool> g_foreign_handler_ran{false};
extern "C" void foreign_handler(int) { g_foreign_handler_ran.store(true); }

TEST(Signals, ReachTheRunWhileEveryTrainingThreadBlocksThem) {
  install_setup_signal_handlers();
  route_training_signals();
  train::StopToken& token = install_signal_handlers(config::OnSigint::kCheckpoint);
  for (int signal : {SIGINT, SIGTERM, SIGHUP, SIGUSR1}) EXPECT_TRUE(blocks(signal)) << signal;
  bool worker_blocks = false;  // a thread started later: a loader worker, one of CUDA's
  std::thread([&] { worker_blocks = blocks(SIGTERM); }).join();
  EXPECT_TRUE(worker_blocks);

  ASSERT_EQ(kill(getpid(), SIGHUP), 0);
  EXPECT_TRUE(within_five_seconds([&] { return token.take_checkpoint_request(); }));
  EXPECT_FALSE(token.stop_requested());

  // A library that installs its own handler for a while (NVRTC, compiling a
  // kernel for cuDNN) does not take the signal from the run.
  struct sigaction foreign {
  }, previous{};
  foreign.sa_handler = foreign_handler;
  sigemptyset(&foreign.sa_mask);
  sigaction(SIGHUP, &foreign, &previous);
  ASSERT_EQ(kill(getpid(), SIGHUP), 0);
  EXPECT_TRUE(within_five_seconds([&] { return token.take_checkpoint_request(); }));
  EXPECT_FALSE(g_foreign_handler_ran.load());
  sigaction(SIGHUP, &previous, nullptr);

  ASSERT_EQ(kill(getpid(), SIGTERM), 0);
  EXPECT_TRUE(within_five_seconds([&] { return token.stop_requested(); }));
  EXPECT_EQ(stop_signal_name(), "SIGTERM");
  EXPECT_FALSE(token.preemption_requested());
  EXPECT_TRUE(blocks(SIGTERM)) << "this thread never took it";

  // Slurm's preemption notice: a stop that checkpoints (checked in the ddp tests end to end).
  ASSERT_EQ(kill(getpid(), SIGUSR1), 0);
  EXPECT_TRUE(within_five_seconds([&] { return token.preemption_requested(); }));
  EXPECT_EQ(stop_signal_name(), "SIGUSR1");

  // A thread that unblocks them on its own runs the run's action too, not the setup's exit.
  struct sigaction current {};
  sigaction(SIGTERM, nullptr, &current);
  EXPECT_NE(current.sa_handler, SIG_DFL);
  struct sigaction setup {};
  install_setup_signal_handlers();
  sigaction(SIGTERM, nullptr, &setup);
  install_signal_handlers(config::OnSigint::kCheckpoint);
  sigaction(SIGTERM, nullptr, &current);
  EXPECT_NE(current.sa_handler, setup.sa_handler);
}

// A preemption notice while the run still sets up: nothing to checkpoint, but the exit code
// must still ask the batch script for a requeue.
TEST(SignalsDeathTest, PreemptionBeforeTrainingExitsWith75) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        install_setup_signal_handlers();
        raise(SIGUSR1);
      },
      ::testing::ExitedWithCode(75), "preempted \\(SIGUSR1\\) before training started; nothing was written");
}

}  // namespace
}  // namespace gputrain::app
