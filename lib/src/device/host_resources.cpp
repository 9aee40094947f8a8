#include "gputrain/device/host_resources.h"

#include <c10/util/Exception.h>
#include <fmt/format.h>

#include <new>
#include <system_error>

#include "gputrain/common/error.h"

namespace gputrain::device {

namespace {

// LibTorch's CPU allocator reports failure as a plain c10::Error from
// c10/core/impl/alloc_cpu.cpp ("DefaultCPUAllocator: not enough memory").
bool is_cpu_allocation_failure(const c10::Error& e) {
  const std::string message = e.what_without_backtrace();
  return message.find("alloc_cpu") != std::string::npos || message.find("DefaultCPUAllocator") != std::string::npos;
}

std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }

constexpr const char* kLimits = "the machine's memory or the process's limits (ulimit -v, ulimit -u) allow no more";

}  // namespace

void rethrow_as_resource_error(const std::string& doing, const std::string& advice) {
  try {
    throw;
  } catch (const std::bad_alloc& e) {
    throw UserError(fmt::format("{}: out of memory ({}; {}). {}.", doing, e.what(), kLimits, advice));
  } catch (const std::system_error& e) {
    if (e.code() != std::errc::resource_unavailable_try_again) throw;
    throw UserError(fmt::format("{}: cannot start a thread ({}; {}). {}.", doing, e.what(), kLimits, advice));
  } catch (const c10::Error& e) {
    if (!is_cpu_allocation_failure(e)) throw;
    throw UserError(
        fmt::format("{}: out of memory ({}; {}). {}.", doing, first_line(e.what_without_backtrace()), kLimits, advice));
  }
}

}  // namespace gputrain::device
