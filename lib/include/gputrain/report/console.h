#pragma once
// The console view of a run: on a terminal a progress bar per epoch (step,
// samples/s, loss, ETA) redrawn in place; otherwise plain log lines at each
// log interval.
#include <cstdio>

#include "gputrain/train/observer.h"

namespace gputrain::report {

class ConsoleReporter : public train::TrainObserver {
 public:
  // `terminal`: draw the bar on `stream` (stderr); else log lines only.
  ConsoleReporter(bool terminal, std::FILE* stream = stderr);
  void on_progress(const train::Progress& p) override;
  void on_step(const train::StepMetrics& m) override;
  void on_epoch(const train::EpochMetrics& m) override;

  // "[=====>    ] 12/40 ..." for a given state and bar width, for tests.
  static std::string render_bar(const train::Progress& p, int width);

 private:
  bool terminal_;
  std::FILE* stream_;
  bool bar_open_ = false;
  double last_draw_s_ = -1;
};

}  // namespace gputrain::report
