#pragma once
#include <string>

namespace gputrain::device {

std::string version();        // gputrain's own, e.g. "0.1.0"
std::string torch_version();  // LibTorch's, e.g. "2.11.0"
// "gputrain 0.1.0 (LibTorch 2.11.0, CUDA 13.0)", for --version and the logs.
std::string version_line();

}  // namespace gputrain::device
