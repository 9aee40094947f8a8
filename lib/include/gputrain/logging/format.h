#pragma once
// Text forms of LibTorch values for log lines.
#include <torch/types.h>

#include <string>

namespace gputrain::logging {

// "[30, 5]", as the seed tutorial's log lines show a tensor's size.
std::string shape_str(const torch::Tensor& tensor);

}  // namespace gputrain::logging
