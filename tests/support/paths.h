#pragma once
// Paths fixed when the build is configured. Only paths.cpp is compiled with them:
// a path on a file's compile line would differ in every clone and keep ccache
// from sharing that file's object between clones (CI builds a fresh clone).

namespace gputrain::testing {

extern const char* const kGputrainBinary;      // the gputrain executable under test
extern const char* const kSourceDir;           // the checkout: configs/, scripts/, the tests' Python helpers
extern const char* const kPausedWritesBinary;  // gputrain with its checkpoint writes paused half-way
extern const char* const kFakeNvmlPath;        // a stand-in NVML with fixed readings
extern const char* const kTorchrun;            // the torch wheel's torchrun; empty where it has none
extern const char* const kTestArtifacts;       // where tests leave files for a person to look at

}  // namespace gputrain::testing
