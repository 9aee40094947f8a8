#include "standard_output.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>

#include "gputrain/common/error.h"
#include "gputrain/common/files.h"

namespace gputrain::app {

CheckedStandardOutput::CheckedStandardOutput()
    : previous_(std::cout.rdbuf(this)), line_buffered_(::isatty(STDOUT_FILENO) != 0) {
  setp(buffer_.data(), buffer_.data() + buffer_.size());
}

CheckedStandardOutput::~CheckedStandardOutput() {
  drain();
  std::cout.rdbuf(previous_);
}

void CheckedStandardOutput::drain() {
  const char* from = pbase();
  while (from < pptr() && error_ == 0) {
    const ssize_t n = ::write(STDOUT_FILENO, from, static_cast<std::size_t>(pptr() - from));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) error_ = n < 0 ? errno : ENOSPC;  // 0 bytes: no progress, as good as full
    if (n > 0) from += n;
  }
  setp(buffer_.data(), buffer_.data() + buffer_.size());
}

CheckedStandardOutput::int_type CheckedStandardOutput::overflow(int_type c) {
  drain();
  if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
  *pptr() = traits_type::to_char_type(c);
  pbump(1);
  return c;
}

std::streamsize CheckedStandardOutput::xsputn(const char* text, std::streamsize count) {
  const std::streamsize put = std::streambuf::xsputn(text, count);
  if (line_buffered_ && std::memchr(text, '\n', static_cast<std::size_t>(count)) != nullptr) drain();
  return put;
}

int CheckedStandardOutput::sync() {
  drain();
  return error_ == 0 ? 0 : -1;
}

void CheckedStandardOutput::finish() {
  std::cout.flush();
  if (error_ == 0) return;
  throw Error(
      write_error_code(error_),
      fmt::format("standard output: cannot write ({}); what the command printed is incomplete", std::strerror(error_)));
}

}  // namespace gputrain::app
