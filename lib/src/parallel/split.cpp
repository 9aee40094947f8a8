#include "gputrain/parallel/split.h"

#include "gputrain/common/error.h"
#include "gputrain/data/batch_loader.h"

namespace gputrain::parallel {

std::vector<ReplicaSplit> split_batch(int64_t rows, const std::vector<std::string>& devices) {
  GPUTRAIN_CHECK(!devices.empty(), "split_batch needs at least one device");
  const auto n = static_cast<int64_t>(devices.size());
  std::vector<ReplicaSplit> splits;
  // The loaders' rule, so that a ddp rank loads exactly the rows logged as its share.
  for (int64_t replica = 0; replica < n; ++replica) {
    const data::RowRange r = data::shard_rows(rows, {replica, n});
    if (r.begin >= r.end) break;
    splits.push_back({replica, devices[static_cast<std::size_t>(replica)], r.begin, r.end});
  }
  return splits;
}

std::vector<int64_t> chunk_sizes(const std::vector<ReplicaSplit>& splits) {
  std::vector<int64_t> sizes;
  for (const auto& s : splits) sizes.push_back(s.rows());
  return sizes;
}

}  // namespace gputrain::parallel
