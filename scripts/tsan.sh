#!/usr/bin/env bash
# ThreadSanitizer over the threaded code: the loader (HostLoader: worker threads,
# bounded prefetch, stop mid-epoch) and data parallelism (replica threads, and the
# binary with 8 CPU replicas). A third build of the library (build/tsan), so run by
# hand rather than in CI:  scripts/tsan.sh [ctest options...]
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
"$GPUTRAIN_ROOT/scripts/build.sh" tsan data_tests data_parallel_tests gputrain
cd "$GPUTRAIN_ROOT"
exec ctest --preset tsan -R '^(HostLoader|LoaderOptions|DataParallel|StrategyPlan)\.' "$@"
