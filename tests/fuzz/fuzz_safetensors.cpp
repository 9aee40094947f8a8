// libFuzzer target: the safetensors reader, which model.init_from and the
// weights loaders hand files from model hubs. Every input must parse or throw a
// CheckpointError naming the file; anything else escaping (a crash, an
// allocation larger than the input) is a finding.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gputrain/checkpoint/safetensors.h"
#include "gputrain/common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  try {
    gputrain::checkpoint::parse_safetensors(std::string_view(reinterpret_cast<const char*>(data), size),
                                            "fuzz.safetensors");
  } catch (const gputrain::CheckpointError&) {
    // the expected answer to a damaged file
  }
  return 0;
}
