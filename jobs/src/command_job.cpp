// The command job: fork + execve with a prepared argv/envp, its own process group, the parent's
// death signal, output logged line by line, SIGTERM then SIGKILL on stop. The job-pool thread
// that runs it waits with poll() on the output pipes, a pidfd and a wake-up pipe; no extra threads.
#include "baton/jobs/command_job.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <memory>
#include <optional>
#include <stop_token>
#include <string_view>

#include "baton/mutex/detail/log.hpp"

extern char** environ;

namespace baton {
namespace {

using std::chrono::milliseconds;
using steady = std::chrono::steady_clock;

/// Longest output line logged as one; longer ones are split.
constexpr std::size_t max_line = 16 * 1024;

class unique_fd {
 public:
  unique_fd() = default;
  explicit unique_fd(int fd) : fd_(fd) {}
  unique_fd(unique_fd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  unique_fd& operator=(unique_fd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~unique_fd() { reset(); }
  int get() const noexcept { return fd_; }
  explicit operator bool() const noexcept { return fd_ >= 0; }
  void reset() noexcept {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

std::string errno_text(int e) { return std::strerror(e); }

[[noreturn]] void fail(const std::string& schedule, const std::string& message) {
  detail::log().error("[{}] {}", schedule, message);
  throw command_error(message);
}

std::pair<unique_fd, unique_fd> make_pipe(const std::string& schedule, int extra_flags = 0) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC | extra_flags) != 0)
    fail(schedule, "cannot create a pipe: " + errno_text(errno));
  return {unique_fd(fds[0]), unique_fd(fds[1])};
}

/// RFC 3339 in UTC, with milliseconds only when they are nonzero (as format_rfc3339_utc).
std::string rfc3339_utc(std::chrono::system_clock::time_point tp) {
  const auto ms = std::chrono::floor<milliseconds>(tp.time_since_epoch());
  const auto secs = std::chrono::floor<std::chrono::seconds>(ms);
  const std::time_t t = secs.count();
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[40];
  std::size_t n = std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
  std::string s(buf, n);
  if (auto frac = (ms - secs).count(); frac != 0) {
    char f[8];
    std::snprintf(f, sizeof f, ".%03d", static_cast<int>(frac));
    s += f;
  }
  return s + "Z";
}

std::string signal_name(int sig) {
  if (const char* abbrev = ::sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  return "signal " + std::to_string(sig);
}

double seconds(steady::duration d) { return std::chrono::duration<double>(d).count(); }

/// The daemon's environment, then `extra`, then the BATON_* variables, as "K=V" strings.
std::vector<std::string> child_environment(const command_options& opts, const job_context& ctx) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    env.emplace(std::string(kv.substr(0, eq)), std::string(kv.substr(eq + 1)));
  }
  for (const auto& [k, v] : opts.env) env[k] = v;
  env["BATON_SCHEDULE"] = ctx.schedule;
  env["BATON_MUTEX"] = ctx.schedule;
  env["BATON_FENCING_TOKEN"] = std::to_string(ctx.fence);
  env["BATON_CONTENDER_ID"] = ctx.contender_id;
  env["BATON_FIRE_TIME"] = rfc3339_utc(ctx.fire_time);
  std::vector<std::string> out;
  out.reserve(env.size());
  for (auto& [k, v] : env) out.push_back(k + "=" + v);
  return out;
}

bool executable_file(const std::string& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode) && ::access(path.c_str(), X_OK) == 0;
}

/// argv[0] with a '/' as is; else the first executable match in the child's PATH.
std::optional<std::string> resolve_program(const std::string& program,
                                           const std::vector<std::string>& envp) {
  if (program.find('/') != std::string::npos) return program;
  std::string path = "/usr/local/bin:/usr/bin:/bin";
  for (const auto& kv : envp)
    if (kv.rfind("PATH=", 0) == 0) path = kv.substr(5);
  std::string_view rest(path);
  while (true) {
    auto colon = rest.find(':');
    std::string dir(rest.substr(0, colon));
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + program;
    if (executable_file(candidate)) return candidate;
    if (colon == std::string_view::npos) break;
    rest.remove_prefix(colon + 1);
  }
  return std::nullopt;
}

/// Splits a stream into lines and logs each one tagged with the schedule.
class line_logger {
 public:
  line_logger(const std::string& schedule, const char* stream, spdlog::level::level_enum level)
      : schedule_(schedule), stream_(stream), level_(level) {}

  void feed(std::string_view data) {
    buffer_.append(data);
    std::size_t start = 0;
    while (true) {
      auto nl = buffer_.find('\n', start);
      if (nl == std::string::npos) break;
      emit(std::string_view(buffer_).substr(start, nl - start));
      start = nl + 1;
    }
    buffer_.erase(0, start);
    while (buffer_.size() >= max_line) {
      emit(std::string_view(buffer_).substr(0, max_line));
      buffer_.erase(0, max_line);
    }
  }
  void flush() {
    if (!buffer_.empty()) emit(buffer_);
    buffer_.clear();
  }

 private:
  void emit(std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    detail::log().log(level_, "[{}] {}: {}", schedule_, stream_, line);
  }
  const std::string& schedule_;
  const char* stream_;
  spdlog::level::level_enum level_;
  std::string buffer_;
};

/// Reads what is available; false at end of file (or a read error).
bool drain(int fd, line_logger& out) {
  char buf[8192];
  while (true) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      out.feed(std::string_view(buf, static_cast<std::size_t>(n)));
      continue;
    }
    if (n == 0) return false;
    if (errno == EINTR) continue;
    return errno == EAGAIN || errno == EWOULDBLOCK;
  }
}

void run_command(const command_options& opts, const job_context& ctx) {
  const std::string& name = ctx.schedule;
  const auto envs = child_environment(opts, ctx);
  const auto resolved = resolve_program(opts.argv[0], envs);
  if (!resolved) fail(name, "cannot start '" + opts.argv[0] + "': not found in PATH");
  const std::string& program = *resolved;

  // Everything the child needs is prepared here: after fork() it may only make
  // async-signal-safe calls.
  std::vector<char*> argv;
  for (const auto& a : opts.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  std::vector<char*> envp;
  for (const auto& e : envs) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);

  unique_fd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (!devnull) fail(name, "cannot open /dev/null: " + errno_text(errno));
  auto [out_r, out_w] = make_pipe(name);
  auto [err_r, err_w] = make_pipe(name);
  auto [exec_r, exec_w] = make_pipe(name);  // carries errno when execve fails
  auto [wake_r, wake_w] = make_pipe(name, O_NONBLOCK);
  const pid_t parent = ::getpid();
  long max_fd = ::sysconf(_SC_OPEN_MAX);
  if (max_fd < 0 || max_fd > 65536) max_fd = 65536;
  sigset_t no_signals;
  sigemptyset(&no_signals);
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);

  const auto started = steady::now();
  const pid_t pid = ::fork();
  if (pid < 0) fail(name, "cannot start '" + opts.argv[0] + "': fork failed: " + errno_text(errno));
  if (pid == 0) {
    // Child: async-signal-safe calls only. The death signal follows the forking *thread*: the
    // job-pool thread that runs this job, which lives until the command has exited.
    ::setpgid(0, 0);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != parent) ::_exit(127);  // the daemon died before prctl took effect
    for (int sig = 1; sig < NSIG; ++sig)
      if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &default_action, nullptr);
    ::sigprocmask(SIG_SETMASK, &no_signals, nullptr);
    if (::dup2(devnull.get(), 0) < 0 || ::dup2(out_w.get(), 1) < 0 || ::dup2(err_w.get(), 2) < 0) {
      int e = errno;
      (void)!::write(exec_w.get(), &e, sizeof e);
      ::_exit(127);
    }
    // Keep the daemon's sockets and files out of the job.
    if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0)
      for (int fd = 3; fd < max_fd; ++fd) ::fcntl(fd, F_SETFD, FD_CLOEXEC);
    ::execve(program.c_str(), argv.data(), envp.data());
    int e = errno;
    (void)!::write(exec_w.get(), &e, sizeof e);
    ::_exit(127);
  }

  // Parent. Set the group here too, so that kill(-pid) works even before the child ran.
  ::setpgid(pid, pid);
  out_w.reset();
  err_w.reset();
  exec_w.reset();
  devnull.reset();
  int exec_errno = 0;
  ssize_t n;
  do n = ::read(exec_r.get(), &exec_errno, sizeof exec_errno);
  while (n < 0 && errno == EINTR);
  if (n == static_cast<ssize_t>(sizeof exec_errno)) {
    int status = 0;
    while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
    fail(name, "cannot start '" + program + "': " + errno_text(exec_errno));
  }
  exec_r.reset();
  detail::log().info("[{}] started '{}' as pid {}", name, program, pid);

  unique_fd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  std::stop_callback wake_on_stop(ctx.stop, [fd = wake_w.get()] {
    char c = 1;
    (void)!::write(fd, &c, 1);
  });
  ::fcntl(out_r.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(err_r.get(), F_SETFL, O_NONBLOCK);
  line_logger out_log(name, "stdout", spdlog::level::info);
  line_logger err_log(name, "stderr", spdlog::level::warn);

  bool exited = false;
  bool status_known = true;
  int status = 0;
  std::optional<steady::time_point> term_sent;
  bool kill_sent = false;
  const char* stop_reason = nullptr;
  while (true) {
    if (!exited) {
      pid_t r = ::waitpid(pid, &status, WNOHANG);
      if (r == pid) {
        exited = true;
      } else if (r < 0 && errno == ECHILD) {
        exited = true;  // reaped elsewhere (SIGCHLD ignored): the status is lost
        status_known = false;
      }
    }
    if (exited) {
      if (out_r) drain(out_r.get(), out_log);
      if (err_r) drain(err_r.get(), err_log);
      break;
    }
    const auto now = steady::now();
    if (!term_sent && (ctx.stop.stop_requested() || now >= ctx.deadline)) {
      stop_reason = ctx.stop.stop_requested() ? "stop requested" : "timeout";
      detail::log().info("[{}] {}: sending SIGTERM to process group {}", name, stop_reason, pid);
      ::kill(-pid, SIGTERM);
      term_sent = now;
    }
    if (term_sent && !kill_sent && now >= *term_sent + opts.kill_grace) {
      detail::log().warn(
          "[{}] still running {} ms after SIGTERM: sending SIGKILL to process "
          "group {}",
          name, opts.kill_grace.count(), pid);
      ::kill(-pid, SIGKILL);
      kill_sent = true;
    }
    // Sleep until output, exit, a stop request or the next deadline.
    steady::time_point wake = now + (pidfd ? milliseconds{1000} : milliseconds{50});
    if (!term_sent && ctx.deadline < wake) wake = ctx.deadline;
    if (term_sent && !kill_sent) wake = std::min(wake, *term_sent + opts.kill_grace);
    int timeout_ms = static_cast<int>(
        std::clamp<long long>(std::chrono::ceil<milliseconds>(wake - now).count(), 0, 1000));
    pollfd fds[4] = {{out_r ? out_r.get() : -1, POLLIN, 0},
                     {err_r ? err_r.get() : -1, POLLIN, 0},
                     {pidfd ? pidfd.get() : -1, POLLIN, 0},
                     {wake_r.get(), POLLIN, 0}};
    if (::poll(fds, 4, timeout_ms) < 0 && errno != EINTR)
      detail::log().warn("[{}] poll failed: {}", name, errno_text(errno));
    if (out_r && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) && !drain(out_r.get(), out_log))
      out_r.reset();
    if (err_r && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) && !drain(err_r.get(), err_log))
      err_r.reset();
    if (fds[3].revents & POLLIN) {
      char buf[64];
      while (::read(wake_r.get(), buf, sizeof buf) > 0) {
      }
    }
  }
  out_log.flush();
  err_log.flush();
  // The command is gone; whatever it left in its group must not outlive the run. (The group id
  // stays reserved while any member lives, so this cannot hit an unrelated process.)
  if (::kill(-pid, SIGKILL) == 0)
    detail::log().warn("[{}] killed processes left behind in process group {}", name, pid);

  const double took = seconds(steady::now() - started);
  std::string outcome;
  if (!status_known) {
    detail::log().warn("[{}] exited after {:.3f} s; exit status unknown (reaped elsewhere)", name,
                       took);
    return;
  }
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    if (code == 0) {
      detail::log().info("[{}] exited with status 0{} after {:.3f} s", name,
                         stop_reason ? std::string(" (") + stop_reason + ")" : std::string(), took);
      return;
    }
    outcome = "exited with status " + std::to_string(code);
  } else if (WIFSIGNALED(status)) {
    outcome = "killed by " + signal_name(WTERMSIG(status));
  } else {
    outcome = "ended with wait status " + std::to_string(status);
  }
  char took_text[32];
  std::snprintf(took_text, sizeof took_text, "%.3f", took);
  if (stop_reason) outcome += std::string(" (") + stop_reason + ")";
  outcome += std::string(" after ") + took_text + " s";
  detail::log().warn("[{}] {}", name, outcome);
  throw command_error("'" + opts.argv[0] + "' " + outcome);
}

}  // namespace

job_function make_command_job(command_options opts) {
  if (opts.argv.empty() || opts.argv[0].empty())
    throw std::invalid_argument("command job: argv is empty");
  if (opts.kill_grace < milliseconds::zero())
    throw std::invalid_argument("command job: kill_grace must not be negative");
  for (const auto& [k, v] : opts.env)
    if (k.empty() || k.find('=') != std::string::npos || k.find('\0') != std::string::npos)
      throw std::invalid_argument("command job: invalid environment variable name '" + k + "'");
  for (const auto& a : opts.argv)
    if (a.find('\0') != std::string::npos)
      throw std::invalid_argument("command job: argument contains a NUL character");
  auto shared = std::make_shared<const command_options>(std::move(opts));
  return [shared](const job_context& ctx) { run_command(*shared, ctx); };
}

}  // namespace baton
