#include "readers/http_get.h"

#include <curl/curl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>

#include "gputrain/common/strings.h"
#include "gputrain/data/download.h"
#include "gputrain/data/http.h"

namespace gputrain::data::detail {
namespace {

using Clock = std::chrono::steady_clock;

struct Transfer {
  int fd = -1;
  int64_t offset = 0;      // the file's length before this request
  int64_t received = 0;    // bytes appended by this request
  long status = 0;         // the HTTP status of the last header block
  bool restarted = false;  // the server sent the whole file: written from byte 0
  int write_errno = 0;
  const HttpGetOptions* options = nullptr;
  Clock::time_point started = Clock::now();
  Clock::time_point drawn{};
  bool bar_shown = false;
};

// The status line of each response ("HTTP/1.1 206 Partial Content"): a redirect has several.
size_t on_header(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  const std::string_view line(data, size * count);
  if (line.rfind("HTTP/", 0) == 0) {
    const auto space = line.find(' ');
    if (space != std::string_view::npos)
      t->status = std::strtol(std::string(line.substr(space + 1, 3)).c_str(), nullptr, 10);
  }
  return size * count;
}

size_t on_body(char* data, size_t size, size_t count, void* user) {
  auto* t = static_cast<Transfer*>(user);
  if (t->status != 200 && t->status != 206) return size * count;  // an error page: not the file
  if (t->status == 200 && t->offset > 0 && !t->restarted) {
    // The server ignored the Range request and sends the whole file.
    if (::ftruncate(t->fd, 0) != 0 || ::lseek(t->fd, 0, SEEK_SET) != 0) {
      t->write_errno = errno;
      return 0;
    }
    t->restarted = true;
  }
  const char* from = data;
  size_t left = size * count;
  while (left > 0) {
    const ssize_t n = ::write(t->fd, from, left);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      t->write_errno = n < 0 ? errno : ENOSPC;
      return 0;  // libcurl stops with CURLE_WRITE_ERROR
    }
    from += n;
    left -= static_cast<size_t>(n);
  }
  t->received += static_cast<int64_t>(size * count);
  return size * count;
}

void draw_bar(Transfer& t, bool last) {
  const auto now = Clock::now();
  if (!last && now - t.drawn < std::chrono::milliseconds(200)) return;
  t.drawn = now;
  const int64_t done = (t.restarted ? 0 : t.offset) + t.received;
  const int64_t total = t.options->total;
  const double seconds = std::chrono::duration<double>(now - t.started).count();
  const std::string rate = seconds > 0 ? bytes_text(static_cast<int64_t>(t.received / seconds)) + "/s" : "";
  constexpr int kWidth = 30;
  std::string line;
  if (total > 0) {
    const double fraction = std::min(1.0, static_cast<double>(done) / static_cast<double>(total));
    const int filled = static_cast<int>(fraction * kWidth);
    line = fmt::format("\r{} [{}{}] {:3.0f}% {} of {}  {}   ", t.options->label, std::string(filled, '#'),
                       std::string(kWidth - filled, '.'), fraction * 100, bytes_text(done), bytes_text(total), rate);
  } else {
    line = fmt::format("\r{} {}  {}   ", t.options->label, bytes_text(done), rate);
  }
  std::fputs(line.c_str(), stderr);
  if (last) std::fputs("\n", stderr);
  std::fflush(stderr);
  t.bar_shown = true;
}

int on_progress(void* user, curl_off_t, curl_off_t, curl_off_t, curl_off_t) {
  auto* t = static_cast<Transfer*>(user);
  if (t->status == 200 || t->status == 206) draw_bar(*t, false);
  return 0;
}

void init_curl_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

bool unreachable(CURLcode code) {
  return code == CURLE_COULDNT_RESOLVE_HOST || code == CURLE_COULDNT_RESOLVE_PROXY || code == CURLE_COULDNT_CONNECT ||
         code == CURLE_OPERATION_TIMEDOUT;
}

using Handle = std::unique_ptr<CURL, decltype(&curl_easy_cleanup)>;

// A transfer of `url` with what every request of gputrain's sets: redirects
// followed, no signals (worker threads), errors into `error_text`.
Handle easy_handle(const std::string& url, char* error_text, const char* user_agent) {
  init_curl_once();
  Handle curl(curl_easy_init(), &curl_easy_cleanup);
  if (!curl) return curl;
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 1L);
  curl_easy_setopt(c, CURLOPT_MAXREDIRS, 10L);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error_text);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
  curl_easy_setopt(c, CURLOPT_USERAGENT, user_agent);
  return curl;
}

size_t append_body(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

}  // namespace

HttpGetResult http_get(const std::string& url, int fd, int64_t offset, const HttpGetOptions& options) {
  char error_text[CURL_ERROR_SIZE] = {};
  const Handle curl = easy_handle(url, error_text, "gputrain-datasets-download");
  if (!curl) throw DownloadError("libcurl could not start a transfer (out of memory?)");
  Transfer t;
  t.fd = fd;
  t.offset = offset;
  t.options = &options;
  CURL* c = curl.get();
  // A stalled connection (no byte for this long) is a broken one, resumed by the caller.
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
  curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, options.low_speed_timeout_s);
  if (!options.ca_bundle.empty()) curl_easy_setopt(c, CURLOPT_CAINFO, options.ca_bundle.c_str());
  const std::string range = fmt::format("{}-", offset);
  if (offset > 0) curl_easy_setopt(c, CURLOPT_RANGE, range.c_str());
  curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, on_header);
  curl_easy_setopt(c, CURLOPT_HEADERDATA, &t);
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &t);
  if (options.progress) {
    curl_easy_setopt(c, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(c, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(c, CURLOPT_XFERINFODATA, &t);
  }
  const CURLcode code = curl_easy_perform(c);
  if (t.bar_shown) draw_bar(t, true);
  const std::string reason = error_text[0] != '\0' ? error_text : curl_easy_strerror(code);

  if (t.write_errno != 0) {
    throw UserError(fmt::format("cannot write what {} sends: {}", url, std::strerror(t.write_errno)));
  }
  if (code != CURLE_OK && unreachable(code) && t.received == 0) {
    throw DownloadError(fmt::format(
        "cannot reach {}: {}. Check the network (and a proxy: https_proxy), or set GPUTRAIN_DATASETS_MIRROR to a "
        "mirror you can reach, or copy the files into the data set's folder by hand; run the same command again "
        "to continue",
        url, reason));
  }
  if (code == CURLE_OK && t.status == 416 && offset > 0) {
    // Nothing after `offset`: the file is whole already (its digest decides).
    return HttpGetResult{true, "", 0};
  }
  if (code == CURLE_OK && t.status != 200 && t.status != 206) {
    throw DownloadError(
        fmt::format("{} answered HTTP {}; the file may have moved: set GPUTRAIN_DATASETS_MIRROR "
                    "to a mirror that has it",
                    url, t.status));
  }
  if (code != CURLE_OK && t.received == 0 && t.status != 200 && t.status != 206) {
    throw DownloadError(fmt::format("downloading {} failed: {}", url, reason));
  }
  HttpGetResult result;
  result.complete = code == CURLE_OK;
  result.why = code == CURLE_OK ? "" : reason;
  result.received = t.received;
  return result;
}

}  // namespace gputrain::data::detail

namespace gputrain::data {

HttpResponse http_request(const HttpRequest& request) {
  char error_text[CURL_ERROR_SIZE] = {};
  const detail::Handle curl = detail::easy_handle(request.url, error_text, "gputrain");
  HttpResponse response;
  if (!curl) {
    response.error = "libcurl could not start a transfer (out of memory?)";
    return response;
  }
  CURL* c = curl.get();
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, std::min(request.timeout_s, 30L));
  curl_easy_setopt(c, CURLOPT_TIMEOUT, request.timeout_s);
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  std::unique_ptr<curl_slist, decltype(&curl_slist_free_all)> headers(nullptr, &curl_slist_free_all);
  if (!request.content_type.empty()) {
    headers.reset(curl_slist_append(nullptr, ("Content-Type: " + request.content_type).c_str()));
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.get());
  }
  if (request.method != "GET") {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(request.body.size()));
  }
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, detail::append_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &response.body);
  const CURLcode code = curl_easy_perform(c);
  if (code != CURLE_OK) {
    response.error = error_text[0] != '\0' ? error_text : curl_easy_strerror(code);
    response.body.clear();
    return response;
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

}  // namespace gputrain::data
