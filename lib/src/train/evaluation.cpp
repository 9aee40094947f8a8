#include "gputrain/train/evaluation.h"

#include <fmt/format.h>

#include <cmath>

namespace gputrain::train {

std::string format_test_line(const EvalResult& result) {
  if (!result.classification) return fmt::format("Test set: Average loss: {:.4f}", result.mean_loss());
  return fmt::format("Test set: Average loss: {:.4f}, Accuracy: {}/{} ({:.0f}%)", result.mean_loss(), result.correct,
                     result.samples, 100.0 * result.accuracy());
}

std::vector<std::string> format_class_lines(const EvalResult& result) {
  std::vector<std::string> lines;
  const auto classes = static_cast<int64_t>(std::lround(std::sqrt(static_cast<double>(result.confusion.size()))));
  for (int64_t c = 0; c < classes; ++c) {
    int64_t total = 0;
    for (int64_t p = 0; p < classes; ++p) total += result.confusion[static_cast<std::size_t>(c * classes + p)];
    const int64_t correct = result.confusion[static_cast<std::size_t>(c * classes + c)];
    const auto named = static_cast<std::size_t>(c) < result.class_names.size();
    const std::string label =
        named ? fmt::format("{} ({})", c, result.class_names[static_cast<std::size_t>(c)]) : std::to_string(c);
    lines.push_back(total == 0 ? fmt::format("Accuracy of class {}: no test samples", label)
                               : fmt::format("Accuracy of class {}: {:.0f}% ({}/{})", label,
                                             100.0 * static_cast<double>(correct) / static_cast<double>(total), correct,
                                             total));
  }
  return lines;
}

}  // namespace gputrain::train
