#include "gputrain/report/console.h"

#include <gtest/gtest.h>

namespace gputrain::report {
namespace {

TEST(ConsoleReporter, BarShowsStepRateLossAndEta) {
  train::Progress p{2, 10, 5, 20, 640, 2.0, 0.4321};
  const std::string bar = ConsoleReporter::render_bar(p, 20);
  EXPECT_EQ(bar, "epoch 2/10 [=====>              ] 5/20 320 samples/s loss 0.4321 ETA 6s");
}

}  // namespace
}  // namespace gputrain::report
