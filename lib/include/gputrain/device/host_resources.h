#pragma once
// The host running out of memory or threads, said in words a user can act on:
// what ran out while doing what, and which setting to lower, rather than the
// bare "std::bad_alloc", "Resource temporarily unavailable" (std::thread) or
// "[enforce fail at alloc_cpu.cpp:127]" (LibTorch's CPU allocator). These are
// user errors (exit 2): the config asks for more than the machine, or the
// process's limits (ulimit -v, ulimit -u), allow.
#include <string>

namespace gputrain::device {

// Call only inside a catch block. When the exception being handled is the
// host running out of memory (std::bad_alloc, LibTorch's CPU allocator) or of
// threads (std::system_error with EAGAIN), throws a UserError:
// "<doing>: out of memory (<detail>). <advice>." or "<doing>: cannot start a
// thread (<detail>). <advice>."; any other exception is rethrown unchanged.
[[noreturn]] void rethrow_as_resource_error(const std::string& doing, const std::string& advice);

// Runs `action`, passing what it throws through rethrow_as_resource_error.
template <class Action>
auto with_resource_errors(const std::string& doing, const std::string& advice, Action&& action) -> decltype(action()) {
  try {
    return action();
  } catch (...) {
    rethrow_as_resource_error(doing, advice);
  }
}

}  // namespace gputrain::device
