#include "support/process.hpp"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <new>
#include <stdexcept>
#include <utility>

namespace baton::test {

std::vector<pid_t> processes_with_env(const std::string& entry) {
  std::vector<pid_t> found;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = e.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    const auto paren = line.rfind(')');
    if (paren == std::string::npos || paren + 2 >= line.size()) continue;
    if (line[paren + 2] == 'Z' || line[paren + 2] == 'X') continue;
    std::ifstream env(e.path() / "environ", std::ios::binary);
    std::string var;
    while (std::getline(env, var, '\0'))
      if (var == entry) {
        found.push_back(static_cast<pid_t>(std::stol(name)));
        break;
      }
  }
  return found;
}

long long mono_ns() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1'000'000'000LL + ts.tv_nsec;
}

child_process::child_process(const std::vector<std::string>& argv, child_options options) {
  if (argv.empty()) throw std::invalid_argument("child_process: empty argv");
  int in[2] = {-1, -1};
  int out[2] = {-1, -1};
  if (::pipe2(out, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  if (options.pipe_stdin && ::pipe2(in, O_CLOEXEC) != 0) {
    ::close(out[0]);
    ::close(out[1]);
    throw std::runtime_error("pipe2 failed");
  }
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t parent = ::getpid();
  pid_ = ::fork();
  if (pid_ < 0) {
    for (int fd : {in[0], in[1], out[0], out[1]})
      if (fd >= 0) ::close(fd);
    throw std::runtime_error("fork failed");
  }
  if (pid_ == 0) {
    if (options.own_process_group) {
      ::setpgid(0, 0);
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) ::_exit(127);
    }
    if (in[0] >= 0) ::dup2(in[0], STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::execv(args[0], args.data());
    const char msg[] = "child_process: exec failed\n";
    (void)!::write(STDERR_FILENO, msg, sizeof msg - 1);
    ::_exit(127);
  }
  if (in[0] >= 0) ::close(in[0]);
  ::close(out[1]);
  in_ = in[1];
  out_ = out[0];
}

child_process::child_process(child_process&& other) noexcept
    : pid_(std::exchange(other.pid_, -1)),
      in_(std::exchange(other.in_, -1)),
      out_(std::exchange(other.out_, -1)),
      eof_(other.eof_),
      buffer_(std::move(other.buffer_)),
      lines_(std::move(other.lines_)),
      consumed_(other.consumed_),
      status_(other.status_) {}

child_process& child_process::operator=(child_process&& other) noexcept {
  if (this != &other) {
    this->~child_process();
    new (this) child_process(std::move(other));
  }
  return *this;
}

child_process::~child_process() {
  if (pid_ > 0 && !status_) {
    ::kill(pid_, SIGKILL);
    int st = 0;
    ::waitpid(pid_, &st, 0);
  }
  close_fds();
}

void child_process::close_fds() noexcept {
  if (in_ >= 0) ::close(in_);
  if (out_ >= 0) ::close(out_);
  in_ = out_ = -1;
}

bool child_process::read_some(std::chrono::milliseconds timeout) {
  if (eof_ || out_ < 0) return false;
  pollfd p{out_, POLLIN, 0};
  int r = ::poll(&p, 1, static_cast<int>(std::max<long long>(0, timeout.count())));
  if (r <= 0) return true;  // timeout or EINTR: nothing read, stdout still open
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

std::optional<std::string> child_process::wait_line(
    std::initializer_list<std::string_view> prefixes, std::chrono::milliseconds timeout) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    while (consumed_ < lines_.size()) {
      const auto& line = lines_[consumed_++];
      for (auto prefix : prefixes)
        if (line.starts_with(prefix)) return line;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left <= std::chrono::milliseconds::zero()) return std::nullopt;
    if (!read_some(std::min(left, std::chrono::milliseconds{50})) && consumed_ >= lines_.size())
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

std::size_t child_process::count_lines(std::string_view prefix) const {
  return static_cast<std::size_t>(std::count_if(
      lines_.begin(), lines_.end(), [&](const std::string& l) { return l.starts_with(prefix); }));
}

bool child_process::send(const std::string& line) {
  if (in_ < 0 || status_) return false;
  const std::string data = line + "\n";
  std::size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::write(in_, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // EPIPE: the child is gone
    done += static_cast<std::size_t>(n);
  }
  return true;
}

void child_process::close_stdin() noexcept {
  if (in_ >= 0) ::close(in_);
  in_ = -1;
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

}  // namespace baton::test
