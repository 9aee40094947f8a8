#pragma once
// How many of the host's CPUs this process may use, and how busy they are:
// the facts behind train.threads: auto. LibTorch's default (one intra-op
// thread per physical core) ignores the cgroup quota and other processes;
// three runs on two cores then spin-wait on each other's descheduled threads
// at the end of every parallel region (measured 20-50x slower, not 3x).
#include <filesystem>
#include <optional>
#include <string>

namespace gputrain::device {

struct CpuShare {
  int affinity = 1;             // CPUs in this process's sched_getaffinity mask
  std::optional<double> quota;  // cgroup CPU limit in cores; none when unlimited
  double load = 0;              // 1-minute load average (/proc/loadavg)
  int runnable = 0;             // other threads runnable now (/proc/stat procs_running, less this one)
};

// min(affinity, the quota rounded up), at least 1.
int usable_cpus(const CpuShare& share);

// LibTorch's intra-op threads for a CPU run: one per usable CPU that other
// work leaves free (the usable CPUs less max(load, runnable), rounded to the
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

// The 1-minute load average from a /proc/loadavg-format file; 0 if unreadable.
double read_load_average(const std::filesystem::path& loadavg);

// procs_running from a /proc/stat-format file, less the calling thread; 0 if unreadable.
int read_other_runnable(const std::filesystem::path& stat);

// This process's share, read from sched_getaffinity, /sys/fs/cgroup and /proc.
CpuShare read_cpu_share();

}  // namespace gputrain::device
