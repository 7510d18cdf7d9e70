#include "process.hpp"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <stdexcept>

namespace baton::bench {

child_process::child_process(const std::vector<std::string>& argv) {
  if (argv.empty()) throw std::invalid_argument("child_process: empty argv");
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ::close(in[0]);
    ::close(in[1]);
    throw std::runtime_error("pipe2 failed");
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) {
    for (int fd : {in[0], in[1], out[0], out[1]}) ::close(fd);
    throw std::runtime_error("fork failed");
  }
  if (pid_ == 0) {
    // Own process group: a terminal's Ctrl-C reaches only the benchmark, which then dies and
    // takes its children along (PDEATHSIG).
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);
    ::dup2(in[0], STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::execv(args[0], args.data());
    const char msg[] = "child_process: exec failed\n";
    (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(127);
  }
  ::close(in[0]);
  ::close(out[1]);
  in_ = in[1];
  out_ = out[0];
}

child_process::~child_process() {
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
  if (in_ >= 0) ::close(in_);
  if (out_ >= 0) ::close(out_);
}

bool child_process::read_some(std::chrono::milliseconds timeout) {
  if (eof_) return false;
  pollfd p{out_, POLLIN, 0};
  int r = ::poll(&p, 1, static_cast<int>(std::max<long long>(0, timeout.count())));
  if (r < 0 && errno == EINTR) return true;
  if (r <= 0) return true;
  char chunk[4096];
  ssize_t n = ::read(out_, chunk, sizeof chunk);
  if (n < 0 && errno == EINTR) return true;
  if (n <= 0) {
    eof_ = true;
    return false;
  }
  buffer_.append(chunk, static_cast<std::size_t>(n));
  std::size_t pos;
  while ((pos = buffer_.find('\n')) != std::string::npos) {
    lines_.push_back(buffer_.substr(0, pos));
    buffer_.erase(0, pos + 1);
  }
  return true;
}

std::optional<std::string> child_process::wait_line(std::initializer_list<const char*> prefixes,
                                                    std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    while (consumed_ < lines_.size()) {
      const auto& line = lines_[consumed_++];
      for (const char* prefix : prefixes)
        if (line.rfind(prefix, 0) == 0) return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left <= std::chrono::milliseconds::zero()) return std::nullopt;
    if (!read_some(std::min(left, std::chrono::milliseconds{100})) && consumed_ >= lines_.size())
      return std::nullopt;
  }
}

void child_process::drain() {
  while (!eof_) {
    const auto before = lines_.size() + buffer_.size();
    read_some(std::chrono::milliseconds{0});
    if (lines_.size() + buffer_.size() == before) break;
  }
}

std::size_t child_process::count_lines(const std::string& prefix) const {
  return static_cast<std::size_t>(std::count_if(
      lines_.begin(), lines_.end(), [&](const std::string& l) { return l.rfind(prefix, 0) == 0; }));
}

bool child_process::send(const std::string& line) {
  if (in_ < 0 || status_) return false;
  const std::string data = line + "\n";
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(in_, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // EPIPE: the child is gone (SIGPIPE must be ignored)
    done += static_cast<std::size_t>(n);
  }
  return true;
}

void child_process::signal(int sig) const noexcept {
  if (pid_ > 0 && !status_) ::kill(pid_, sig);
}

std::optional<int> child_process::wait_exit(std::chrono::milliseconds timeout) {
  if (status_) return status_;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int st = 0;
    pid_t r = ::waitpid(pid_, &st, WNOHANG);
    if (r == pid_) {
      status_ = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
      return status_;
    }
    if (std::chrono::steady_clock::now() >= deadline) return std::nullopt;
    // Keep reading so a child blocked on a full stdout pipe can finish.
    if (!read_some(std::chrono::milliseconds{5})) ::usleep(5'000);
  }
}

std::string child_process::describe() {
  auto st = wait_exit(std::chrono::milliseconds{0});
  std::string out = "pid " + std::to_string(pid_);
  if (!st) return out + " (running)";
  return out + " (exited with status " + std::to_string(*st) + ")";
}

std::string expect_line(child_process& child, std::initializer_list<const char*> prefixes,
                        std::chrono::milliseconds timeout, const std::string& what) {
  if (auto line = child.wait_line(prefixes, timeout)) return *line;
  std::string last = child.lines().empty() ? "nothing" : "'" + child.lines().back() + "'";
  throw std::runtime_error("no " + what + " from contender " + child.describe() + " within " +
                           std::to_string(timeout.count()) + " ms (its last line: " + last + ")");
}

std::vector<std::string> contender_argv(const backend_config& config, const std::string& mutex,
                                        const std::vector<std::string>& flags) {
  std::vector<std::string> argv{bench_bin_dir() + "/baton_contender_child", "--type", config.type,
                                "--mutex", mutex};
  for (const auto& [key, value] : config.params) {
    argv.push_back("--param");
    argv.push_back(key + "=" + value);
  }
  argv.insert(argv.end(), flags.begin(), flags.end());
  return argv;
}

long long last_field(const std::string& line) {
  auto pos = line.find_last_of(' ');
  try {
    return std::stoll(pos == std::string::npos ? line : line.substr(pos + 1));
  } catch (const std::exception&) {
    throw std::runtime_error("malformed event line from a child: '" + line + "'");
  }
}

std::string field(const std::string& line, std::size_t index) {
  std::istringstream in(line);
  std::string f;
  for (std::size_t i = 0; i <= index; ++i)
    if (!(in >> f)) return {};
  return f;
}

void sleep_until_ns(long long ns) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(ns / 1'000'000'000);
  ts.tv_nsec = static_cast<long>(ns % 1'000'000'000);
  while (::clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr) == EINTR) {
  }
}

std::string bench_bin_dir() {
  if (const char* dir = std::getenv("BATON_BENCH_BIN"); dir && *dir) return dir;
  char path[4096];
  ssize_t n = ::readlink("/proc/self/exe", path, sizeof path - 1);
  if (n <= 0) throw std::runtime_error("BATON_BENCH_BIN is not set and /proc/self/exe unreadable");
  std::string self(path, static_cast<std::size_t>(n));
  return self.substr(0, self.find_last_of('/'));
}

}  // namespace baton::bench
