#include "gputrain/device/cpu_share.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <thread>

namespace gputrain::device {

int usable_cpus(const CpuShare& share) {
  int usable = std::max(1, share.affinity);
  if (share.quota && *share.quota > 0) usable = std::min(usable, static_cast<int>(std::ceil(*share.quota)));
  return std::max(1, usable);
}

ThreadChoice choose_threads(const CpuShare& share, int default_threads) {
  const int usable = usable_cpus(share);
  const double busy = std::max(share.load, static_cast<double>(share.runnable));
  const int free = static_cast<int>(std::lround(std::max(0.0, usable - busy)));
  const int threads = std::clamp(std::min(free, default_threads), 1, std::max(1, default_threads));
  const std::string limit =
      share.quota ? fmt::format("cgroup quota {:.2f} CPUs", *share.quota) : std::string("no cgroup quota");
  std::string why = fmt::format("{} usable CPUs (affinity {}, {}), other work {:.1f} (load {:.2f}, {} runnable)",
                                usable, share.affinity, limit, busy, share.load, share.runnable);
  if (threads == default_threads) {
    why += fmt::format("; LibTorch's default of {}", default_threads);
  } else if (free < default_threads) {
    why += "; no more threads than free CPUs, so none spin-waits on a descheduled one";
  }
  return {threads, why};
}

namespace {

// The first line of `path`, or "" when it cannot be read.
std::string first_line(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::optional<double> number(const std::string& text) {
  std::istringstream in(text);
  double value = 0;
  if (!(in >> value)) return std::nullopt;
  return value;
}

}  // namespace

std::optional<double> read_cgroup_quota(const std::filesystem::path& cgroup_root) {
  const std::string v2 = first_line(cgroup_root / "cpu.max");
  if (!v2.empty()) {
    std::istringstream in(v2);
    std::string quota;
    double period = 0;
    if (!(in >> quota >> period) || quota == "max" || period <= 0) return std::nullopt;
    const std::optional<double> q = number(quota);
    return q && *q > 0 ? std::optional<double>(*q / period) : std::nullopt;
  }
  const std::optional<double> quota = number(first_line(cgroup_root / "cpu" / "cpu.cfs_quota_us"));
  const std::optional<double> period = number(first_line(cgroup_root / "cpu" / "cpu.cfs_period_us"));
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
  return *quota / *period;
}

double read_load_average(const std::filesystem::path& loadavg) { return number(first_line(loadavg)).value_or(0.0); }

int read_other_runnable(const std::filesystem::path& stat) {
  std::ifstream in(stat);
  std::string key;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    long running = 0;
    if (fields >> key && key == "procs_running" && fields >> running)
      return static_cast<int>(std::max(0L, running - 1));
  }
  return 0;
}

CpuShare read_cpu_share() {
  CpuShare share;
  cpu_set_t set;
  CPU_ZERO(&set);
  share.affinity = sched_getaffinity(0, sizeof(set), &set) == 0
                       ? CPU_COUNT(&set)
                       : static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  share.quota = read_cgroup_quota("/sys/fs/cgroup");
  share.load = read_load_average("/proc/loadavg");
  share.runnable = read_other_runnable("/proc/stat");
  return share;
}

}  // namespace gputrain::device
