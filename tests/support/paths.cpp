#include "support/paths.h"

namespace gputrain::testing {

const char* const kGputrainBinary = GPUTRAIN_BINARY;
const char* const kSourceDir = GPUTRAIN_SOURCE_DIR;
const char* const kPausedWritesBinary = GPUTRAIN_PAUSED_WRITES_BINARY;
const char* const kFakeNvmlPath = FAKE_NVML_PATH;
const char* const kTorchrun = GPUTRAIN_TORCHRUN;
const char* const kTestArtifacts = GPUTRAIN_TEST_ARTIFACTS;

}  // namespace gputrain::testing
