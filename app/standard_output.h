#pragma once
// Standard output, checked: what a command prints there is its product (the
// config, the predictions, the summary line), and a write that fails (a full
// disk under `> file`) must fail the command as --out's would, not leave a
// cut-short file after exit 0. C's stdio keeps no errno of a failed write, so
// std::cout writes through this buffer, which keeps it.
#include <array>
#include <streambuf>

namespace gputrain::app {

// While alive, std::cout writes to file descriptor 1 through this buffer
// (flushed at each std::flush and std::endl, and at each line on a terminal).
class CheckedStandardOutput : public std::streambuf {
 public:
  CheckedStandardOutput();
  ~CheckedStandardOutput() override;  // flushes, and gives std::cout its own buffer back
  CheckedStandardOutput(const CheckedStandardOutput&) = delete;
  CheckedStandardOutput& operator=(const CheckedStandardOutput&) = delete;

  // Flushes; an Error naming the cause when any write failed, with --out's
  // exit code for it (write_error_code: 2 for a full disk).
  void finish();

 protected:
  int_type overflow(int_type c) override;
  std::streamsize xsputn(const char* text, std::streamsize count) override;
  int sync() override;

 private:
  void drain();  // writes what is buffered; on failure keeps the first errno and drops the rest

  std::array<char, 1 << 16> buffer_{};
  std::streambuf* previous_;
  bool line_buffered_;
  int error_ = 0;
};

}  // namespace gputrain::app
