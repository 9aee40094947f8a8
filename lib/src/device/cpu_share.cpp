#include "gputrain/device/cpu_share.h"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <cctype>
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
  const double busy = std::max(share.busy, static_cast<double>(share.runnable));
  const int free = static_cast<int>(std::lround(std::max(0.0, usable - busy)));
  const int threads = std::clamp(std::min(free, default_threads), 1, std::max(1, default_threads));
  const std::string limit =
      share.quota ? fmt::format("cgroup quota {:.2f} CPUs", *share.quota) : std::string("no cgroup quota");
  std::string why = fmt::format("{} usable CPUs (affinity {}, {}), other work {:.1f} ({:.2f} CPUs busy, {} runnable)",
                                usable, share.affinity, limit, busy, share.busy, share.runnable);
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

// /proc/stat and this process's times as they stood when the program started.
struct Reading {
  CpuTimes times;
  std::chrono::steady_clock::time_point at;
};

Reading read_now() { return {read_cpu_times("/proc/stat", "/proc/self/stat"), std::chrono::steady_clock::now()}; }

const Reading& program_start() {
  static const Reading at_start = read_now();
  return at_start;
}

// Taken while the program loads, so the window covers its start-up (reading the
// data, building the model), whoever asks first.
[[maybe_unused]] const Reading& kProgramStart = program_start();

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

CpuTimes read_cpu_times(const std::filesystem::path& stat, const std::filesystem::path& own_stat) {
  CpuTimes times;
  std::ifstream in(stat);
  for (std::string line; std::getline(in, line);) {
    // "cpu3 user nice system idle iowait irq softirq steal ..."; "cpu " is the sum of them all.
    if (line.rfind("cpu", 0) != 0 || line.size() < 4 || std::isdigit(static_cast<unsigned char>(line[3])) == 0) {
      continue;
    }
    std::istringstream fields(line.substr(3));
    CpuTimes::Cpu cpu;
    int64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0, steal = 0;
    if (!(fields >> cpu.id >> user >> nice >> system >> idle >> iowait >> irq >> softirq)) continue;
    fields >> steal;  // absent before Linux 2.6.11
    cpu.busy = user + nice + system + irq + softirq + steal;
    cpu.total = cpu.busy + idle + iowait;
    times.cpus.push_back(cpu);
  }
  // utime and stime are fields 14 and 15; the command name (field 2) may hold spaces, so count after its ')'.
  const std::string own = first_line(own_stat);
  const std::size_t name_end = own.rfind(')');
  if (name_end != std::string::npos) {
    std::istringstream fields(own.substr(name_end + 1));
    std::string skipped;
    for (int field = 3; field < 14 && fields >> skipped; ++field) {
    }
    int64_t utime = 0, stime = 0;
    if (fields >> utime >> stime) times.own = utime + stime;
  }
  return times;
}

double other_busy_cpus(const CpuTimes& before, const CpuTimes& after, const std::vector<int>& mask) {
  int64_t busy = 0;
  int64_t total = 0;
  int64_t counted = 0;
  for (const CpuTimes::Cpu& now : after.cpus) {
    if (!mask.empty() && std::find(mask.begin(), mask.end(), now.id) == mask.end()) continue;
    const auto then = std::find_if(before.cpus.begin(), before.cpus.end(),
                                   [&](const CpuTimes::Cpu& cpu) { return cpu.id == now.id; });
    if (then == before.cpus.end()) continue;
    busy += now.busy - then->busy;
    total += now.total - then->total;
    ++counted;
  }
  if (counted == 0 || total <= 0) return 0;
  const double window = static_cast<double>(total) / static_cast<double>(counted);  // one CPU's jiffies
  return std::max(0.0, static_cast<double>(busy - (after.own - before.own)) / window);
}

int read_other_runnable(const std::filesystem::path& stat, int own_running) {
  std::ifstream in(stat);
  std::string key;
  for (std::string line; std::getline(in, line);) {
    std::istringstream fields(line);
    long running = 0;
    if (fields >> key && key == "procs_running" && fields >> running)
      return static_cast<int>(std::max(0L, running - own_running));
  }
  return 0;
}

int own_running_threads(const std::filesystem::path& tasks) {
  int running = 0;
  std::error_code error;
  for (const auto& task : std::filesystem::directory_iterator(tasks, error)) {
    const std::string line = first_line(task.path() / "stat");
    const std::size_t name_end = line.rfind(')');  // the name may hold spaces and parentheses
    if (name_end != std::string::npos && name_end + 2 < line.size() && line[name_end + 2] == 'R') ++running;
  }
  return std::max(1, running);
}

CpuShare read_cpu_share(std::chrono::milliseconds min_window) {
  CpuShare share;
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> mask;
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    share.affinity = CPU_COUNT(&set);
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
      if (CPU_ISSET(cpu, &set)) mask.push_back(cpu);
    }
  } else {
    share.affinity = static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
  }
  share.quota = read_cgroup_quota("/sys/fs/cgroup");
  const Reading& start = program_start();
  const auto since_start = std::chrono::steady_clock::now() - start.at;
  if (since_start < min_window) std::this_thread::sleep_for(min_window - since_start);
  share.busy = other_busy_cpus(start.times, read_now().times, mask);
  // procs_running is one instant: a reader of this process's log, woken for a
  // line, counts like a busy process. The least of a few samples keeps what stays runnable.
  constexpr int kRunnableSamples = 5;
  share.runnable = read_other_runnable("/proc/stat", own_running_threads("/proc/self/task"));
  for (int sample = 1; sample < kRunnableSamples && share.runnable > 0; ++sample) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
    share.runnable =
        std::min(share.runnable, read_other_runnable("/proc/stat", own_running_threads("/proc/self/task")));
  }
  return share;
}

}  // namespace gputrain::device
