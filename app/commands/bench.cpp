#include <CLI/CLI.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "commands.h"
#include "gputrain/bench/bench.h"
#include "gputrain/plan/start.h"

namespace gputrain::app {

CLI::App* add_bench_command(CLI::App& app, BenchArgs& args) {
  auto* bench = app.add_subcommand(
      "bench", "time a train step phase by phase (data, forward, backward, optimizer) and the compute bound");
  add_config_options(bench, args.config, args.overrides);
  bench->add_option("--steps", args.steps, "timed steps (default: 100)")->check(whole_number(1, 1'000'000'000));
  bench->add_option("--warmup", args.warmup, "untimed steps first (default: 10)")
      ->check(whole_number(0, 1'000'000'000));
  bench
      ->add_option("--profile", args.profile,
                   "after the timed steps, N more recorded by LibTorch's profiler: a Chrome/Perfetto trace and the "
                   "top operators by self time")
      ->check(whole_number(1, 1'000'000));
  bench->add_option("--profile-trace", args.profile_trace,
                    "where --profile's trace goes (default: profile_trace.json)");
  bench->add_flag("--json", args.json, "print the report as one JSON object");
  bench->add_flag("--loader-only", args.loader_only,
                  "time the training split's batches alone, as the run would load them (--steps batches)");
  return bench;
}

namespace {

int print_loader_bench(const bench::LoaderBenchReport& r, bool json) {
  if (!json) {
    std::cout << bench::format_loader_bench(r) << std::flush;
    return 0;
  }
  const nlohmann::ordered_json out{{"dataset", r.dataset},
                                   {"device", r.device},
                                   {"threads", r.threads},
                                   {"workers", r.workers},
                                   {"device_cache", r.device_cache},
                                   {"batch", r.batch},
                                   {"batches", r.batches},
                                   {"warmup", r.warmup},
                                   {"samples_per_s", r.samples_per_s},
                                   {"wait_ms", r.wait_ms}};
  std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace

int run_bench(const BenchArgs& args) {
  plan::StartRequest request;
  request.purpose = plan::Purpose::kBench;
  request.command = "bench";
  request.config_files = args.config;
  request.overrides = args.overrides;
  request.cuda_visible_devices = args.env.cuda_visible_devices;
  request.kernel_cache_env = args.env.kernel_caches;
  const plan::RunPlan plan = plan::start_run(request).run;
  if (args.loader_only) return print_loader_bench(bench::run_loader_bench(plan, {args.steps, args.warmup}), args.json);
  const bench::BenchReport r = bench::run_bench(plan, {args.steps, args.warmup}, {args.profile, args.profile_trace});
  if (!args.json) {
    std::cout << bench::format_bench(r) << std::flush;
    return 0;
  }
  nlohmann::ordered_json phases = nlohmann::ordered_json::object();
  for (const auto& p : r.phases) phases[p.name] = {{"mean_ms", p.mean_ms}, {"min_ms", p.min_ms}};
  nlohmann::ordered_json out{{"model", r.model},
                             {"dataset", r.dataset},
                             {"device", r.device},
                             {"threads", r.threads},
                             {"batch", r.batch},
                             {"accumulation", r.accumulation},
                             {"step", r.step},
                             {"steps", r.steps},
                             {"warmup", r.warmup},
                             {"phases", phases},
                             {"samples_per_s", r.samples_per_s},
                             {"bound_step_ms", r.bound_step_ms},
                             {"bound_samples_per_s", r.bound_samples_per_s},
                             {"bound_graphed", r.bound_graphed}};
  if (r.profile) {
    nlohmann::ordered_json ops = nlohmann::ordered_json::array();
    for (const train::OperatorTime& op : r.profile->top) {
      ops.push_back({{"name", op.name}, {"calls", op.calls}, {"self_ms", op.self_ms}, {"total_ms", op.total_ms}});
    }
    out["profile"] = {{"trace", r.profile->trace.string()}, {"steps", r.profile->steps}, {"operators", ops}};
  }
  std::cout << out.dump() << std::endl;
  return 0;
}

}  // namespace gputrain::app
