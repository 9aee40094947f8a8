// libFuzzer target: the checkpoint reader. The first byte picks what the rest
// is: 0, a whole file (header and payload), which mostly exercises the
// envelope's checks; 1, a payload that the target seals with a valid header
// first, so that mutations reach LibTorch's archive reader and the checks of
// what it holds. Every input must parse or throw a CheckpointError naming the
// file; anything else escaping (a c10::Error, a crash) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gputrain/checkpoint/checkpoint.h"
#include "gputrain/checkpoint/format.h"
#include "gputrain/common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  using namespace gputrain;
  if (size < 1) return 0;
  const std::string_view rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::string bytes = data[0] == 1 ? checkpoint::seal(rest) : std::string(rest);
  try {
    checkpoint::Checkpoint::parse(bytes, "fuzz.ckpt");
  } catch (const CheckpointError&) {
    // the expected answer to a damaged file
  }
  return 0;
}
