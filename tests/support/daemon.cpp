#include "support/daemon.hpp"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "support/env.hpp"

extern char** environ;

namespace baton::test {

namespace fs = std::filesystem;

std::string daemon_path() { return std::string(BATON_BINARY_DIR) + "/daemon/baton"; }

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

void write_file(const fs::path& path, const std::string& text, bool executable) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
  if (executable)
    fs::permissions(path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                              fs::perms::others_read | fs::perms::others_exec);
}

std::size_t count_of(const std::string& text, const std::string& needle) {
  std::size_t n = 0;
  for (std::size_t p = 0; (p = text.find(needle, p)) != std::string::npos; ++p) ++n;
  return n;
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

process::process(const std::vector<std::string>& argv, const fs::path& out, const fs::path& err) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const int rc = posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + ": " + std::strerror(rc));
}

process::~process() {
  if (!status_) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
}

void process::signal(int sig) const { ::kill(pid_, sig); }

std::optional<int> process::wait_exit(std::chrono::milliseconds timeout) {
  wait_until(
      [&] {
        if (status_) return true;
        int st = 0;
        if (::waitpid(pid_, &st, WNOHANG) == pid_)
          status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        return status_.has_value();
      },
      timeout);
  return status_;
}

command_result run_baton_command(const std::vector<std::string>& args,
                                 std::chrono::milliseconds timeout) {
  static std::atomic<int> counter{0};
  const fs::path dir = temp_dir("baton-command");
  const auto n = std::to_string(++counter);
  std::vector<std::string> argv{daemon_path()};
  argv.insert(argv.end(), args.begin(), args.end());
  command_result r;
  {
    process p(argv, dir / ("out" + n), dir / ("err" + n));
    r.status = p.wait_exit(timeout).value_or(-1);
  }
  r.out = read_file(dir / ("out" + n));
  r.err = read_file(dir / ("err" + n));
  return r;
}

}  // namespace baton::test
