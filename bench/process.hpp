#pragma once
// A child process for the benchmarks: commands go to its stdin, its stdout is read line by line,
// its stderr is inherited. Every wait takes a timeout, so a child that hangs or dies is an error
// for the caller to report, never a hang.
#include <sys/types.h>

#include <chrono>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "baton/mutex/backend.hpp"

namespace baton::bench {

class child_process {
 public:
  /// Starts argv[0] (a path) with the arguments, in its own process group, killed (SIGKILL)
  /// when this process dies. Throws std::runtime_error when it cannot be started.
  explicit child_process(const std::vector<std::string>& argv);
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;
  /// Kills (SIGKILL) and reaps the child if it is still running.
  ~child_process();

  pid_t pid() const noexcept { return pid_; }
  /// The next stdout line starting with one of `prefixes` (lines before it are skipped, but
  /// stay in lines()); nullopt when `timeout` passes or the child closes its stdout.
  std::optional<std::string> wait_line(std::initializer_list<const char*> prefixes,
                                       std::chrono::milliseconds timeout);
  /// Reads whatever stdout has ready without waiting.
  void drain();
  /// How many lines received so far start with `prefix`.
  std::size_t count_lines(const std::string& prefix) const;
  /// Writes `line` and a newline to the child's stdin; false if the child is gone.
  bool send(const std::string& line);
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

  pid_t pid_ = -1;
  int in_ = -1;   // child's stdin (write end)
  int out_ = -1;  // child's stdout (read end)
  bool eof_ = false;
  std::string buffer_;
  std::vector<std::string> lines_;
  std::size_t consumed_ = 0;
  std::optional<int> status_;
};

/// wait_line() that throws std::runtime_error naming `what`, the child and its state when the
/// line does not come within `timeout`.
std::string expect_line(child_process& child, std::initializer_list<const char*> prefixes,
                        std::chrono::milliseconds timeout, const std::string& what);

/// The command line of baton_contender_child (bench/contender_child.cpp) contending for `mutex`
/// on the backend `config`, followed by `flags`.
std::vector<std::string> contender_argv(const backend_config& config, const std::string& mutex,
                                        const std::vector<std::string>& flags = {});

/// The last whitespace-separated field of `line` as a number (the events' CLOCK_MONOTONIC ns).
long long last_field(const std::string& line);
/// The `index`-th whitespace-separated field of `line` (0 is the event name); empty if missing.
std::string field(const std::string& line, std::size_t index);

/// Sleeps until CLOCK_MONOTONIC reaches `ns` (returns at once if it has).
void sleep_until_ns(long long ns);

/// Directory of the benchmark programs: $BATON_BENCH_BIN, else the directory of this program.
std::string bench_bin_dir();

}  // namespace baton::bench
