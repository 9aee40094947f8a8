#pragma once
// The data module's own random numbers. SplitMix64 is tiny, fast and the same
// on every platform and library version (std::shuffle and the std
// distributions are not), so generated files, shuffles and augmentations are
// reproducible from the seed alone.
#include <cstdint>

namespace gputrain::data::detail {

class SplitMix64 {
 public:
  explicit SplitMix64(uint64_t seed) : state_(seed) {}

  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n); n is small here, so the modulo bias (< n / 2^64) is nil.
  uint64_t below(uint64_t n) { return next() % n; }
  // Uniform in [low, high), from the top 53 bits (a double's precision).
  double uniform(double low, double high) { return low + (high - low) * static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

// An independent seed for sub-stream `stream` of `seed` (an epoch, a batch, a split).
inline uint64_t derive_seed(uint64_t seed, uint64_t stream) {
  return SplitMix64(seed ^ SplitMix64(stream + 0x5851f42d4c957f2dULL).next()).next();
}

}  // namespace gputrain::data::detail
