#include "gputrain/train/evaluation.h"

#include <fmt/format.h>

namespace gputrain::train {

std::string format_test_line(const EvalResult& result) {
  if (!result.classification) return fmt::format("Test set: Average loss: {:.4f}", result.mean_loss());
  return fmt::format("Test set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)", result.mean_loss(), result.correct,
                     result.samples, 100.0 * result.accuracy());
}

}  // namespace gputrain::train
