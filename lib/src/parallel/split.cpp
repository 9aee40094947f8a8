#include "gputrain/parallel/split.h"

#include "gputrain/common/error.h"

namespace gputrain::parallel {

std::vector<ReplicaSplit> split_batch(int64_t rows, const std::vector<std::string>& devices) {
  GPUTRAIN_CHECK(!devices.empty(), "split_batch needs at least one device");
  const auto n = static_cast<int64_t>(devices.size());
  const int64_t chunk = (rows + n - 1) / n;
  std::vector<ReplicaSplit> splits;
  for (int64_t replica = 0, begin = 0; replica < n && begin < rows; ++replica, begin += chunk) {
    splits.push_back({replica, devices[static_cast<std::size_t>(replica)], begin, std::min(rows, begin + chunk)});
  }
  return splits;
}

std::vector<int64_t> chunk_sizes(const std::vector<ReplicaSplit>& splits) {
  std::vector<int64_t> sizes;
  for (const auto& s : splits) sizes.push_back(s.rows());
  return sizes;
}

}  // namespace gputrain::parallel
