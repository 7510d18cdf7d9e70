#pragma once
// A child process with its stdout readable line by line (for multi-process tests).
#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace baton::test {

/// Live processes (not zombies) whose environment holds `entry` ("NAME=value"): a run's whole
/// process tree, when its command was given a unique variable (descendants inherit it).
std::vector<pid_t> processes_with_env(const std::string& entry);

/// Monotonic nanoseconds (CLOCK_MONOTONIC: comparable between processes on one host).
long long mono_ns();

class child_process {
 public:
  /// Starts argv[0] with the arguments; stdout is captured, stderr inherited.
  explicit child_process(const std::vector<std::string>& argv);
  child_process(child_process&& other) noexcept;
  child_process& operator=(child_process&& other) noexcept;
  child_process(const child_process&) = delete;
  /// Kills (SIGKILL) and reaps the child if still running.
  ~child_process();

  pid_t pid() const noexcept { return pid_; }
  /// The next stdout line starting with `prefix` (earlier lines are kept in lines()), or
  /// nullopt when `timeout` passes or the child closes stdout.
  std::optional<std::string> wait_line(const std::string& prefix,
                                       std::chrono::milliseconds timeout);
  /// Sends a signal.
  void signal(int sig) const;
  /// Waits up to `timeout` for exit; the exit status (or 128+signal), or nullopt on timeout.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);
  const std::vector<std::string>& lines() const noexcept { return lines_; }

 private:
  bool read_some(std::chrono::milliseconds timeout);
  pid_t pid_ = -1;
  int out_ = -1;
  std::string buffer_;
  std::vector<std::string> lines_;
  std::size_t consumed_ = 0;
  std::optional<int> status_;
};

}  // namespace baton::test
