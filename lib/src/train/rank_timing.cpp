#include "gputrain/train/rank_timing.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <torch/torch.h>

#include <algorithm>

namespace gputrain::train {

namespace {

Spread spread(const std::vector<RankFigures>& ranks, double (*figure)(const RankFigures&)) {
  Spread s{figure(ranks.front()), 0, figure(ranks.front())};
  for (const RankFigures& r : ranks) {
    const double v = figure(r);
    s.min = std::min(s.min, v);
    s.max = std::max(s.max, v);
    s.mean += v / static_cast<double>(ranks.size());
  }
  return s;
}

int64_t busiest(const std::vector<RankFigures>& ranks) {
  const auto most = std::max_element(
      ranks.begin(), ranks.end(), [](const RankFigures& a, const RankFigures& b) { return a.work_s() < b.work_s(); });
  return most - ranks.begin();
}

double milliseconds(double seconds) { return 1000 * seconds; }

}  // namespace

RankTiming summarize(const std::vector<RankFigures>& ranks) {
  RankTiming t;
  t.ranks = static_cast<int64_t>(ranks.size());
  if (ranks.empty()) return t;
  t.step_s = spread(ranks, [](const RankFigures& r) { return r.step_s; });
  t.data_wait_s = spread(ranks, [](const RankFigures& r) { return r.data_wait_s; });
  t.collective_wait_s = spread(ranks, [](const RankFigures& r) { return r.collective_wait_s; });
  t.slowest = busiest(ranks);
  return t;
}

std::optional<std::string> StragglerWatch::observe(const std::vector<RankFigures>& ranks) {
  if (warned_ || ranks.size() < 2) return std::nullopt;
  const int64_t slowest = busiest(ranks);
  double others = 0;
  for (std::size_t r = 0; r < ranks.size(); ++r) {
    if (static_cast<int64_t>(r) != slowest) others += ranks[r].work_s() / static_cast<double>(ranks.size() - 1);
  }
  const double work = ranks[slowest].work_s();
  const bool slower = work > (1 + kMargin) * others && work - others > kFloorS;
  if (!slower || slowest != suspect_) {
    suspect_ = slower ? slowest : -1;
    in_a_row_ = 0;
    suspect_work_s_ = others_work_s_ = 0;
    if (!slower) return std::nullopt;
  }
  ++in_a_row_;
  suspect_work_s_ += work;
  others_work_s_ += others;
  if (in_a_row_ < kIntervals) return std::nullopt;
  warned_ = true;
  const std::string host = static_cast<std::size_t>(slowest) < hosts_.size() ? hosts_[slowest] : "?";
  return fmt::format(
      "ddp: rank {} on host {} is a straggler: over the last {} log intervals its own work per step (step time "
      "less collective wait) took {:.2f}x the other ranks' mean ({:.2f} ms vs {:.2f} ms), so they wait for it in "
      "every all-reduce; metrics.jsonl's `ranks` records and the report's chart show each interval",
      slowest, host, kIntervals, suspect_work_s_ / others_work_s_, milliseconds(suspect_work_s_ / kIntervals),
      milliseconds(others_work_s_ / kIntervals));
}

RankTimer::RankTimer(parallel::Strategy& strategy) : strategy_(strategy), watch_(strategy.rank_hosts()) {}

void RankTimer::start_interval(int64_t step, double loader_wait_s) {
  start_step_ = step;
  start_loader_wait_s_ = loader_wait_s;
  start_collective_wait_s_ = strategy_.collective_wait_s();
}

std::optional<RankTiming> RankTimer::end_interval(int64_t step, double interval_s, double loader_wait_s) {
  if (strategy_.world_size() < 2) return std::nullopt;
  const double steps = static_cast<double>(std::max<int64_t>(1, step - start_step_));
  const torch::Tensor mine = torch::tensor({interval_s / steps, (loader_wait_s - start_loader_wait_s_) / steps,
                                            (strategy_.collective_wait_s() - start_collective_wait_s_) / steps},
                                           torch::kFloat64);
  const torch::Tensor rows = strategy_.rows_of_every_rank(mine).contiguous();
  std::vector<RankFigures> ranks;
  const double* values = rows.data_ptr<double>();
  for (int64_t r = 0; r < rows.size(0); ++r) ranks.push_back({values[3 * r], values[3 * r + 1], values[3 * r + 2]});
  if (const auto warning = watch_.observe(ranks); warning && strategy_.is_primary()) spdlog::warn("{}", *warning);
  return summarize(ranks);
}

}  // namespace gputrain::train
