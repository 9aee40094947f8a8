#pragma once
// How many of the host's CPUs this process may use, and how busy they are:
// the facts behind train.threads: auto. LibTorch's default (one intra-op
// thread per physical core) ignores the cgroup quota and other processes;
// three runs on two cores then spin-wait on each other's descheduled threads
// at the end of every parallel region (measured 20-50x slower, not 3x).
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace gputrain::device {

struct CpuShare {
  int affinity = 1;             // CPUs in this process's sched_getaffinity mask
  std::optional<double> quota;  // cgroup CPU limit in cores; none when unlimited
  // CPUs of the affinity mask other processes kept busy while this one
  // started up (/proc/stat, from the program's start to the decision, at
  // least 50 ms). Not the load average: a job that ended a minute ago still
  // holds the 1-minute average near its thread count, which took a run that
  // followed another on an idle 2-core machine down to 1 thread. And not a
  // short sleep at the decision: two runs started together would sleep
  // through the same window and each find the CPUs idle.
  double busy = 0;
  int runnable = 0;  // other threads runnable now (/proc/stat procs_running, less this one)
};

// min(affinity, the quota rounded up), at least 1.
int usable_cpus(const CpuShare& share);

// LibTorch's intra-op threads for a CPU run: one per usable CPU that other
// work leaves free (the usable CPUs less max(busy, runnable), rounded to the
// nearest), at least 1 and at most `default_threads` (LibTorch's default).
// Fewer threads than free CPUs means none waits at a parallel region's end for
// a thread the kernel has descheduled. `why` is for the run-start log.
struct ThreadChoice {
  int threads = 1;
  std::string why;
};
ThreadChoice choose_threads(const CpuShare& share, int default_threads);

// The cgroup CPU limit in cores under `cgroup_root` (normally /sys/fs/cgroup):
// v2's cpu.max ("200000 100000" = 2 cores; "max ..." = none), else v1's
// cpu/cpu.cfs_quota_us over cpu/cpu.cfs_period_us (-1 = none). Unreadable
// or malformed files count as no limit.
std::optional<double> read_cgroup_quota(const std::filesystem::path& cgroup_root);

// Jiffies each CPU spent busy and in all, from a /proc/stat-format file, and
// this process's own from a /proc/self/stat-format one.
struct CpuTimes {
  struct Cpu {
    int id = 0;
    int64_t busy = 0;   // user, nice, system, irq, softirq, steal
    int64_t total = 0;  // busy, idle and iowait
  };
  std::vector<Cpu> cpus;
  int64_t own = 0;  // this process's utime + stime
};
CpuTimes read_cpu_times(const std::filesystem::path& stat, const std::filesystem::path& own_stat);

// The CPUs among `mask` (ids; empty: all) that other processes kept busy
// between two readings: their busy jiffies less this process's own, over one
// CPU's jiffies in the window. 0 when the readings cannot tell.
double other_busy_cpus(const CpuTimes& before, const CpuTimes& after, const std::vector<int>& mask);

// procs_running from a /proc/stat-format file, less this process's own
// `own_running` threads (the caller at least); 0 if unreadable.
int read_other_runnable(const std::filesystem::path& stat, int own_running = 1);

// This process's threads that are running or runnable, in a
// /proc/self/task-format directory (state R in each thread's stat): LibTorch's
// OpenMP workers spin a while after a parallel region, and are no other work.
// At least 1, the caller.
int own_running_threads(const std::filesystem::path& tasks);

// This process's share, read from sched_getaffinity, /sys/fs/cgroup and /proc.
// The CPUs' busy time is counted from /proc/stat as it stood when the program
// started; should that be under `min_window` ago, it waits out the rest.
CpuShare read_cpu_share(std::chrono::milliseconds min_window = std::chrono::milliseconds(50));

}  // namespace gputrain::device
