#pragma once
// Helpers for tests that run the `baton` executable: files, JSON strings and a child process
// whose stdout and stderr go to files.
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace baton::test {

/// build/daemon/baton.
std::string daemon_path();

/// The whole file, or "" if it cannot be read.
std::string read_file(const std::filesystem::path& path);

/// Replaces the file with `text` (mode 0755 when `executable`).
void write_file(const std::filesystem::path& path, const std::string& text,
                bool executable = false);

/// `s` as a JSON string literal.
std::string json_string(const std::string& s);

/// How often `needle` occurs in `text`.
std::size_t count_of(const std::string& text, const std::string& needle);

/// A child process with stdin /dev/null and stdout/stderr appended to files. The destructor
/// kills (SIGKILL) and reaps it if it still runs.
class process {
 public:
  process(const std::vector<std::string>& argv, const std::filesystem::path& out,
          const std::filesystem::path& err);
  process(const process&) = delete;
  process& operator=(const process&) = delete;
  ~process();
  pid_t pid() const noexcept { return pid_; }
  void signal(int sig) const;
  /// Exit status (128 + signal when killed), or nullopt if still running after `timeout`.
  std::optional<int> wait_exit(std::chrono::milliseconds timeout);
  bool running() { return !wait_exit(std::chrono::milliseconds{0}); }

 private:
  pid_t pid_ = -1;
  std::optional<int> status_;
};

/// What a finished command printed and how it ended.
struct command_result {
  int status = -1;  ///< exit status; -1 when it did not exit within the timeout (then killed)
  std::string out;
  std::string err;
};

/// Runs `baton args...` (daemon_path()) to completion, at most `timeout`.
command_result run_baton_command(const std::vector<std::string>& args,
                                 std::chrono::milliseconds timeout = std::chrono::seconds{30});

}  // namespace baton::test
