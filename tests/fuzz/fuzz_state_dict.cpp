// libFuzzer target: the state-dict reader's pickle machine, which
// model.init_from hands files saved by PyTorch (torch.save(model.state_dict())).
// The input is data.pkl's bytes; every storage it names holds 64 zero bytes.
// Every input must parse or throw a CheckpointError naming the file; anything
// else escaping (a c10::Error, a crash, a leak) is a finding.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "gputrain/checkpoint/state_dict.h"
#include "gputrain/common/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  const auto record = [](const std::string&) -> std::optional<std::string> { return std::string(64, '\0'); };
  try {
    gputrain::checkpoint::unpickle_state_dict(std::string_view(reinterpret_cast<const char*>(data), size), record,
                                              "fuzz.pt");
  } catch (const gputrain::CheckpointError&) {
    // the expected answer to a damaged file
  }
  return 0;
}
