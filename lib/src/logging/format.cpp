#include "gputrain/logging/format.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace gputrain::logging {

std::string shape_str(const torch::Tensor& tensor) { return fmt::format("[{}]", fmt::join(tensor.sizes(), ", ")); }

}  // namespace gputrain::logging
