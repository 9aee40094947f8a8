#pragma once
// How a batch is shared among replicas or ranks: PyTorch's scatter rule, a
// chunk of ceil(B / n) rows each, the last one shorter, and fewer chunks when
// the batch is too small to reach every replica (30 over 8: 4,4,4,4,4,4,4,2;
// 10 over 8: 2,2,2,2,2). The same object is what runs and what gets logged.
#include <fmt/format.h>

#include <cstdint>
#include <string>
#include <vector>

namespace gputrain::parallel {

struct ReplicaSplit {
  int64_t replica = 0;
  std::string device;  // "cuda:1", "cpu", or "rank 3"
  int64_t begin = 0;   // rows [begin, end) of the batch
  int64_t end = 0;
  int64_t rows() const { return end - begin; }
};

std::vector<ReplicaSplit> split_batch(int64_t rows, const std::vector<std::string>& devices);

// Just the chunk sizes of split_batch, for tensor.split_with_sizes.
std::vector<int64_t> chunk_sizes(const std::vector<ReplicaSplit>& splits);

}  // namespace gputrain::parallel

template <>
struct fmt::formatter<gputrain::parallel::ReplicaSplit> : fmt::formatter<std::string_view> {
  auto format(const gputrain::parallel::ReplicaSplit& s, fmt::format_context& ctx) const {
    return fmt::format_to(ctx.out(), "replica={} device={} rows=[{},{}) n={}", s.replica, s.device, s.begin, s.end,
                          s.rows());
  }
};
