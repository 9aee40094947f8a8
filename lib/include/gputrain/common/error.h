#pragma once
// The error hierarchy every module throws. Each error carries the process exit
// code it maps to, so app/ can turn any failure into the right status without
// knowing which module raised it.
#include <stdexcept>
#include <string>
#include <string_view>

namespace gputrain {

// kPreempted: a preemption notice (SIGUSR1) was answered with a checkpoint on
// every rank; sysexits' EX_TEMPFAIL ("try again later"), on which a Slurm batch
// script runs `scontrol requeue` and the requeued job resumes (train.resume: auto).
enum class ExitCode : int { kOk = 0, kRuntime = 1, kUserInput = 2, kPreempted = 75, kInterrupted = 130 };

// Where a value came from: a file position (1-based) or a named origin such as
// "--set #2". An empty origin means unknown.
struct SourceMark {
  std::string origin;
  int line = 0;
  int column = 0;

  bool known() const { return !origin.empty(); }
  // "file:line:col", "--set #2" or "" when unknown.
  std::string str() const;
};

class Error : public std::runtime_error {
 public:
  Error(ExitCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
  ExitCode code() const { return code_; }

 private:
  ExitCode code_;
};

// The user's input is wrong (exit code 2).
class UserError : public Error {
 public:
  explicit UserError(const std::string& message) : Error(ExitCode::kUserInput, message) {}
};

// A config value is wrong. what() reads like a compiler error:
// "configs/cifar.yaml:12:15: data.batch_size: must be > 0 (got -4)".
// Components below the config stage name only the key (a device the machine
// does not have, a model the data cannot feed); the run's resolution places
// them in the file (`located`).
class ConfigError : public UserError {
 public:
  ConfigError(SourceMark where, std::string key, std::string_view problem);
  const SourceMark& where() const { return where_; }
  const std::string& key() const { return key_; }
  const std::string& problem() const { return problem_; }
  // The same problem at `where`.
  ConfigError located(SourceMark where) const { return ConfigError(std::move(where), key_, problem_); }

 private:
  SourceMark where_;
  std::string key_;
  std::string problem_;
};

// Data files that are missing or malformed.
class DataError : public UserError {
 public:
  using UserError::UserError;
};

// Checkpoint files that are missing, corrupt or foreign.
class CheckpointError : public UserError {
 public:
  using UserError::UserError;
};

// A collective or rendezvous failure (exit code 1: not the user's input).
class DistributedError : public Error {
 public:
  explicit DistributedError(const std::string& message) : Error(ExitCode::kRuntime, message) {}
};

// A broken invariant inside gputrain; the message records file:line.
class InternalError : public Error {
 public:
  explicit InternalError(const std::string& message) : Error(ExitCode::kRuntime, message) {}
};

// Training stopped on request (signal); exit code 130.
class Interrupted : public Error {
 public:
  explicit Interrupted(const std::string& message) : Error(ExitCode::kInterrupted, message) {}
};

namespace detail {
[[noreturn]] void throw_internal(const char* file, int line, const std::string& message);
}  // namespace detail

}  // namespace gputrain

// GPUTRAIN_CHECK(cond, "fmt {}", args...) throws InternalError naming file:line.
#define GPUTRAIN_CHECK(cond, ...)                                                                  \
  do {                                                                                             \
    if (!(cond)) ::gputrain::detail::throw_internal(__FILE__, __LINE__, fmt::format(__VA_ARGS__)); \
  } while (false)
