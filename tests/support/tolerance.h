#pragma once
// Numbers that two processes, two thread counts or two libraries computed agree
// only to float32's rounding: another summation order (another thread count's
// split, another instruction set's vector width, another library's kernel)
// moves a sum by a few units of its last place, so in proportion to the
// magnitudes summed. Such a comparison takes a tolerance relative to the values
// compared; equality to the bit holds only within one process and environment.
#include <algorithm>
#include <cmath>

namespace gputrain::testing {

// `relative` of `magnitude`, or of 1 below it: a value near 0 may be a sum of
// larger terms, whose rounding it keeps.
inline double relative_tolerance(double relative, double magnitude) {
  return relative * std::max(1.0, std::abs(magnitude));
}

}  // namespace gputrain::testing
