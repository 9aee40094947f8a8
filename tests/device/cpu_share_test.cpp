#include "gputrain/device/cpu_share.h"

#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace gputrain::device {
namespace {

using testing::TempDir;
using testing::write_text;

CpuShare share(int affinity, std::optional<double> quota, double busy, int runnable) {
  CpuShare s;
  s.affinity = affinity;
  s.quota = quota;
  s.busy = busy;
  s.runnable = runnable;
  return s;
}

TEST(CpuShare, UsableCpusAreTheAffinityCappedByTheQuotaRoundedUp) {
  EXPECT_EQ(usable_cpus(share(8, std::nullopt, 0, 0)), 8);
  EXPECT_EQ(usable_cpus(share(8, 2.0, 0, 0)), 2);
  EXPECT_EQ(usable_cpus(share(8, 1.5, 0, 0)), 2);
  EXPECT_EQ(usable_cpus(share(2, 4.0, 0, 0)), 2) << "taskset 2 CPUs inside a 4-CPU container";
  EXPECT_EQ(usable_cpus(share(4, 0.25, 0, 0)), 1);
  EXPECT_EQ(usable_cpus(share(0, std::nullopt, 0, 0)), 1);
}

TEST(CpuShare, AQuietMachineKeepsLibTorchsDefault) {
  const ThreadChoice quiet = choose_threads(share(2, std::nullopt, 0.3, 0), 2);
  EXPECT_EQ(quiet.threads, 2);
  EXPECT_EQ(
      quiet.why,
      "2 usable CPUs (affinity 2, no cgroup quota), other work 0.3 (0.30 CPUs busy, 0 runnable); LibTorch's default of "
      "2");
  EXPECT_EQ(choose_threads(share(16, std::nullopt, 0, 0), 8).threads, 8) << "never more than LibTorch's default";
}

TEST(CpuShare, ABusyMachineGetsOneThreadPerFreeCpu) {
  // Three runs on two cores: the other two are runnable.
  const ThreadChoice shared = choose_threads(share(2, std::nullopt, 0.5, 2), 2);
  EXPECT_EQ(shared.threads, 1);
  EXPECT_NE(shared.why.find("other work 2.0 (0.50 CPUs busy, 2 runnable); no more threads than free CPUs"),
            std::string::npos)
      << shared.why;
  EXPECT_EQ(choose_threads(share(2, std::nullopt, 1.9, 0), 2).threads, 1) << "the busy CPUs alone";
  EXPECT_EQ(choose_threads(share(16, std::nullopt, 4.2, 3), 16).threads, 12);
  EXPECT_EQ(choose_threads(share(16, 4.0, 1.0, 0), 16).threads, 3) << "the quota's 4 less 1 busy";
  EXPECT_NE(choose_threads(share(16, 4.0, 1.0, 0), 16).why.find("cgroup quota 4.00 CPUs"), std::string::npos);
}

TEST(CpuShare, ReadsCgroupV2CpuMax) {
  TempDir dir;
  write_text(dir / "cpu.max", "150000 100000\n");
  EXPECT_DOUBLE_EQ(read_cgroup_quota(dir.path()).value(), 1.5);
  write_text(dir / "cpu.max", "max 100000\n");
  EXPECT_FALSE(read_cgroup_quota(dir.path()));
  write_text(dir / "cpu.max", "garbage\n");
  EXPECT_FALSE(read_cgroup_quota(dir.path()));
}

TEST(CpuShare, ReadsCgroupV1CfsQuota) {
  TempDir dir;
  write_text(dir / "cpu" / "cpu.cfs_quota_us", "200000\n");
  write_text(dir / "cpu" / "cpu.cfs_period_us", "100000\n");
  EXPECT_DOUBLE_EQ(read_cgroup_quota(dir.path()).value(), 2.0);
  write_text(dir / "cpu" / "cpu.cfs_quota_us", "-1\n");
  EXPECT_FALSE(read_cgroup_quota(dir.path()));
  EXPECT_FALSE(read_cgroup_quota(dir / "missing"));
}

TEST(CpuShare, ReadsTheOtherRunnableThreads) {
  TempDir dir;
  const auto stat = write_text(dir / "stat", "cpu  1 2 3 4\nctxt 99\nprocs_running 3\nprocs_blocked 0\n");
  EXPECT_EQ(read_other_runnable(stat), 2) << "less the thread reading";
  EXPECT_EQ(read_other_runnable(dir / "missing"), 0);
  EXPECT_EQ(read_other_runnable(stat, 3), 0) << "all three are this process's";
}

// LibTorch's OpenMP workers spin runnable after a forward pass; counted as
// other work, they made train.threads: auto choose 1 thread on an idle machine.
TEST(CpuShare, OwnRunningThreadsAreNotOtherWork) {
  TempDir dir;
  write_text(dir / "task" / "100" / "stat", "100 (gputrain) R 1 2 3\n");
  write_text(dir / "task" / "101" / "stat", "101 (omp (worker)) R 1 2 3\n");
  write_text(dir / "task" / "102" / "stat", "102 (loader) S 1 2 3\n");
  EXPECT_EQ(own_running_threads(dir / "task"), 2);
  EXPECT_EQ(own_running_threads(dir / "missing"), 1) << "the caller, at least";
  EXPECT_GE(own_running_threads("/proc/self/task"), 1);
}

// Two CPUs over a window of 10 jiffies each: cpu0 ran 9 busy, cpu1 3, and 2
// of those 12 were this process's own, so other processes kept 1.0 CPU busy.
TEST(CpuShare, OtherBusyCpusAreTheBusyJiffiesLessOurOwnOverOneCpusWindow) {
  TempDir dir;
  const auto own = write_text(dir / "self", "4242 (gputrain (bench)) R 1 2 3 4 5 6 7 8 9 10 100 50 0 0\n");
  const CpuTimes before =
      read_cpu_times(write_text(dir / "stat0",
                                "cpu  200 0 100 1000 0 0 0 0\ncpu0 100 0 50 500 0 0 0 0\ncpu1 100 0 50 500 0 0 0 0\n"
                                "intr 1\nprocs_running 1\n"),
                     own);
  ASSERT_EQ(before.cpus.size(), 2U) << "the sum line is not a CPU";
  EXPECT_EQ(before.own, 150);
  EXPECT_EQ(before.cpus[1].busy, 150);
  EXPECT_EQ(before.cpus[1].total, 650);
  const CpuTimes after =
      read_cpu_times(write_text(dir / "stat1", "cpu0 105 1 53 501 0 0 0 0\ncpu1 101 0 50 507 0 1 1 0\n"),
                     write_text(dir / "self1", "4242 (gputrain (bench)) R 1 2 3 4 5 6 7 8 9 10 101 51 0 0\n"));
  EXPECT_DOUBLE_EQ(other_busy_cpus(before, after, {}), 1.0);
  // This process runs only on the CPUs of its mask, so all its time is taken from theirs.
  EXPECT_NEAR(other_busy_cpus(before, after, {1}), 0.1, 1e-12) << "cpu1 alone: 3 busy less our 2, over 10";
  EXPECT_DOUBLE_EQ(other_busy_cpus(before, before, {}), 0.0) << "no time passed";
  EXPECT_DOUBLE_EQ(other_busy_cpus(before, after, {7}), 0.0) << "no CPU of the mask";
  EXPECT_TRUE(read_cpu_times(dir / "missing", dir / "missing").cpus.empty());
}

TEST(CpuShare, ThisProcessSeesAtLeastOneCpu) {
  const CpuShare here = read_cpu_share();
  EXPECT_GE(here.affinity, 1);
  EXPECT_GE(usable_cpus(here), 1);
  EXPECT_GE(here.busy, 0.0);
}

}  // namespace
}  // namespace gputrain::device
