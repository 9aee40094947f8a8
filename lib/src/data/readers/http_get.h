#pragma once
// One HTTP(S) GET into a file, continuing it where it ends: the only code that
// sees libcurl (download.cpp decides what to fetch and checks what came).
#include <cstdint>
#include <string>

namespace gputrain::data::detail {

struct HttpGetOptions {
  std::string label;      // the file's name, for the progress bar
  int64_t total = 0;      // its full size when known, for the progress bar
  bool progress = false;  // draw the bar on standard error
  std::string ca_bundle;  // CA certificates; "" leaves libcurl's default
  long low_speed_timeout_s = 60;
};

struct HttpGetResult {
  bool complete = false;  // false: the connection broke mid-file; what came is good to continue from
  std::string why;        // when not complete: libcurl's reason
  int64_t received = 0;   // bytes this request added
};

// GETs `url` and appends it to `fd`, a file `offset` bytes long: with offset
// > 0 it asks for the rest (Range), and a server that answers with the whole
// file has it written from the start (the file truncated first). Throws
// DownloadError when the server cannot be reached (the message names the URL
// and the fixes) or answers with an error status; a transfer cut short
// returns complete = false.
HttpGetResult http_get(const std::string& url, int fd, int64_t offset, const HttpGetOptions& options);

}  // namespace gputrain::data::detail
