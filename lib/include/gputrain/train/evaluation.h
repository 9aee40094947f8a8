#pragma once
#include <vector>
// What one pass over a split measured, and the seed's test line.
#include <cstdint>
#include <string>

namespace gputrain::train {

struct EvalResult {
  double loss_sum = 0;  // summed per-sample losses
  int64_t correct = 0;  // classification only
  int64_t samples = 0;
  bool classification = true;
  // Classification on the test split: counts by true class (row) and
  // predicted class (column), classes x classes, row-major; empty otherwise.
  std::vector<int64_t> confusion;
  std::vector<std::string> class_names;  // index -> name where the data set has names (DatasetInfo)

  double mean_loss() const { return samples > 0 ? loss_sum / static_cast<double>(samples) : 0.0; }
  double accuracy() const { return samples > 0 ? static_cast<double>(correct) / static_cast<double>(samples) : 0.0; }
};

// "Test set: Average loss: 0.0123, Accuracy: 9012/10000 (90%)", exactly as the
// seed tutorial prints it; regression prints the loss alone.
std::string format_test_line(const EvalResult& result);

// One line per class from the confusion matrix, as the CIFAR-10 tutorial
// prints them: "Accuracy of class 3: 87% (870/1000)", "Accuracy of class 3
// (cat): ..." where the class has a name; none without the matrix.
std::vector<std::string> format_class_lines(const EvalResult& result);

}  // namespace gputrain::train
