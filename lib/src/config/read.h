#pragma once
#include "gputrain/config/config.h"
#include "node_reader.h"

namespace gputrain::config::detail {

// The experiment from the document's root mapping, every key checked as schema.h declares it.
ExperimentConfig read_experiment(NodeReader& root, const SourceMap& sources);

}  // namespace gputrain::config::detail
