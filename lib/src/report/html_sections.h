#pragma once
// The HTML report's tables: the summary cards, the epochs (with the classes),
// the batch splits, the run's facts and its devices.
#include <nlohmann/json.hpp>
#include <string>

#include "gputrain/train/profile.h"

#include "gputrain/report/run_info.h"
#include "html_run.h"

namespace gputrain::report::detail {

std::string summary_section(const Run& run);
std::string epochs_section(const Run& run);
std::string splits_section(const RunInfo& info);
std::string run_section(const RunInfo& info);
std::string device_section(const nlohmann::ordered_json& device);
// train.profile's table of operators by self time, naming the trace.
std::string profile_section(const train::ProfileSummary& profile);

}  // namespace gputrain::report::detail
