#pragma once
// A child process with its stdout read line by line, for multi-process tests and benchmarks.
// Every wait takes a timeout, so a child that hangs or dies is an error for the caller to report,
// never a hang.
#include <sys/types.h>

#include <chrono>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace baton::test {

/// Live processes (not zombies) whose environment holds `entry` ("NAME=value"): a run's whole
/// process tree, when its command was given a unique variable (descendants inherit it).
std::vector<pid_t> processes_with_env(const std::string& entry);

/// Monotonic nanoseconds (CLOCK_MONOTONIC: comparable between processes on one host).
long long mono_ns();

/// How child_process starts its child (the defaults suit tests).
struct child_options {
  /// Give the child a pipe as stdin, written by send(); else it inherits this process's stdin.
  bool pipe_stdin = false;
  /// Own process group (a terminal's Ctrl-C reaches only this process) and SIGKILL when this
  /// process dies (PR_SET_PDEATHSIG), so an interrupted benchmark leaves no child behind.
  bool own_process_group = false;
};

class child_process {
 public:
  /// Starts argv[0] (a path) with the arguments; stdout is captured, stderr inherited. Throws
  /// std::runtime_error when it cannot be started.
  explicit child_process(const std::vector<std::string>& argv, child_options options = {});
  child_process(child_process&& other) noexcept;
  child_process& operator=(child_process&& other) noexcept;
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  /// Kills (SIGKILL) and reaps the child if it is still running.
  ~child_process();

  pid_t pid() const noexcept { return pid_; }
  /// The next stdout line starting with one of `prefixes` (lines before it are skipped, but
  /// stay in lines()); nullopt when `timeout` passes or the child closes its stdout.
  std::optional<std::string> wait_line(std::initializer_list<std::string_view> prefixes,
                                       std::chrono::milliseconds timeout);
  /// wait_line() for one prefix.
  std::optional<std::string> wait_line(std::string_view prefix, std::chrono::milliseconds timeout) {
    return wait_line({prefix}, timeout);
  }
  /// Reads whatever stdout has ready without waiting.
  void drain();
  /// How many lines received so far start with `prefix`.
  std::size_t count_lines(std::string_view prefix) const;
  /// Writes `line` and a newline to the child's stdin (child_options::pipe_stdin); false if the
  /// child is gone or has no stdin pipe. Ignore SIGPIPE to get false rather than a signal.
  bool send(const std::string& line);
  /// Closes the child's stdin pipe (end of input: some children stop on it).
  void close_stdin() noexcept;
  /// Sends a signal (if the child has not been reaped).
  void signal(int sig) const noexcept;
  /// Waits up to `timeout` for exit: the exit status (or 128 + signal), nullopt on timeout.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);
  /// "pid N (running)" or "pid N (exited with status S)", for error messages.
  std::string describe();
  const std::vector<std::string>& lines() const noexcept { return lines_; }

 private:
  // Waits up to `timeout` for output and reads it; false once stdout is closed.
  bool read_some(std::chrono::milliseconds timeout);
  void close_fds() noexcept;

  pid_t pid_ = -1;
  int in_ = -1;   // child's stdin (write end), -1 without child_options::pipe_stdin
  int out_ = -1;  // child's stdout (read end)
  bool eof_ = false;
  std::string buffer_;
  std::vector<std::string> lines_;
  std::size_t consumed_ = 0;
  std::optional<int> status_;
};

}  // namespace baton::test
