#include "gputrain/device/cpu_share.h"

#include <gtest/gtest.h>

#include "support/temp_dir.h"

namespace gputrain::device {
namespace {

using testing::TempDir;
using testing::write_text;

CpuShare share(int affinity, std::optional<double> quota, double load, int runnable) {
  CpuShare s;
  s.affinity = affinity;
  s.quota = quota;
  s.load = load;
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
      "2 usable CPUs (affinity 2, no cgroup quota), other work 0.3 (load 0.30, 0 runnable); LibTorch's default of 2");
  EXPECT_EQ(choose_threads(share(16, std::nullopt, 0, 0), 8).threads, 8) << "never more than LibTorch's default";
}

TEST(CpuShare, ABusyMachineGetsOneThreadPerFreeCpu) {
  // Three runs on two cores: the other two are runnable.
  const ThreadChoice shared = choose_threads(share(2, std::nullopt, 0.5, 2), 2);
  EXPECT_EQ(shared.threads, 1);
  EXPECT_NE(shared.why.find("other work 2.0 (load 0.50, 2 runnable); no more threads than free CPUs"),
            std::string::npos)
      << shared.why;
  EXPECT_EQ(choose_threads(share(2, std::nullopt, 7.9, 0), 2).threads, 1) << "the load average alone";
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

TEST(CpuShare, ReadsTheLoadAverageAndTheOtherRunnableThreads) {
  TempDir dir;
  EXPECT_DOUBLE_EQ(read_load_average(write_text(dir / "loadavg", "3.41 2.10 1.05 4/812 12345\n")), 3.41);
  EXPECT_DOUBLE_EQ(read_load_average(dir / "missing"), 0.0);
  const auto stat = write_text(dir / "stat", "cpu  1 2 3 4\nctxt 99\nprocs_running 3\nprocs_blocked 0\n");
  EXPECT_EQ(read_other_runnable(stat), 2) << "less the thread reading";
  EXPECT_EQ(read_other_runnable(dir / "missing"), 0);
}

TEST(CpuShare, ThisProcessSeesAtLeastOneCpu) {
  const CpuShare here = read_cpu_share();
  EXPECT_GE(here.affinity, 1);
  EXPECT_GE(usable_cpus(here), 1);
  EXPECT_GE(here.load, 0.0);
}

}  // namespace
}  // namespace gputrain::device
