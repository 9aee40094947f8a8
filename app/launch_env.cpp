// The launcher's variables (torchrun, srun, --nproc's parent) as a LaunchInfo.
#include <fmt/format.h>

#include "commands.h"
#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"

namespace gputrain::app {

namespace {

int64_t integer(const EnvValue& v) {
  std::size_t used = 0;
  try {
    const int64_t value = std::stoll(v.value, &used);
    if (used == v.value.size()) return value;
  } catch (const std::exception&) {
  }
  throw UserError(fmt::format("{}='{}' is not an integer; check the launcher's settings", v.name, v.value));
}

}  // namespace

checkpoint::Restarts restarts(const Environment& env, const parallel::LaunchInfo& launch) {
  checkpoint::Restarts out;
  out.elastic = launch.attempt;  // launch_info read TORCHELASTIC_RESTART_COUNT already
  if (env.slurm_restart_count) out.slurm = integer(*env.slurm_restart_count);
  return out;
}

std::optional<checkpoint::ResolvedBatch> launcher_batch(const Environment& env) {
  if (!env.resolved_batch) return std::nullopt;
  const std::vector<std::string> parts = split(env.resolved_batch->value, ',');
  if (parts.size() != 3) {
    throw UserError(fmt::format("{}='{}' is not global,accumulation,test; it is set by `train --nproc` for its workers",
                                env.resolved_batch->name, env.resolved_batch->value));
  }
  const auto number = [&](const std::string& part) { return integer(EnvValue{env.resolved_batch->name, part}); };
  return checkpoint::ResolvedBatch{number(parts[0]), number(parts[1]), number(parts[2])};
}

std::string launcher_batch_variable(const checkpoint::ResolvedBatch& batch) {
  return fmt::format("{}={},{},{}", kResolvedBatchVariable, batch.global, batch.accumulation, batch.test);
}

parallel::LaunchInfo launch_info(const Environment& env) {
  parallel::LaunchInfo launch;
  if (env.rank || env.world_size) {
    if (!env.rank || !env.world_size) {
      const EnvValue& given = env.rank ? *env.rank : *env.world_size;
      throw UserError(
          fmt::format("{} is set but {} is not: a launched process needs both its rank and the world "
                      "size",
                      given.name, env.rank ? "WORLD_SIZE" : "RANK"));
    }
    launch.rank = integer(*env.rank);
    launch.world_size = integer(*env.world_size);
    launch.local_rank = env.local_rank ? integer(*env.local_rank) : launch.rank;  // one machine
  }
  if (env.master_addr) launch.master_addr = env.master_addr->value;
  if (env.master_port) launch.master_port = integer(*env.master_port);
  launch.agent_store = env.agent_store && env.agent_store->value == "True";  // Python's str(True)
  if (env.restart_count) launch.attempt = integer(*env.restart_count);
  parallel::check_launch(launch);
  return launch;
}

}  // namespace gputrain::app
