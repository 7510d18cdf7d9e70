// The command job: fork a per-run supervisor (supervisor.cpp) that execs the command, log its
// output line by line, and tell the supervisor when the run must end. The job-pool thread that
// runs it waits with poll() on the output pipes, the supervisor's report pipe and a wake-up
// pipe; no extra threads.
#include "baton/jobs/command_job.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <iterator>
#include <memory>
#include <optional>
#include <stop_token>
#include <string_view>
#include <tuple>

#include "baton/mutex/detail/log.hpp"
#include "supervisor.hpp"

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
  detail::log({.schedule = schedule, .event = "job.error"}).error("{}", message);
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

/// The daemon's environment without `opts.withheld_env`, then HOME/USER/LOGNAME of `identity`,
/// then `opts.env`, then the BATON_* variables, as "K=V" strings.
std::vector<std::string> child_environment(const command_options& opts, const job_context& ctx,
                                           const std::optional<command_identity>& identity) {
  std::map<std::string, std::string> env;
  for (char** e = environ; e && *e; ++e) {
    std::string_view kv(*e);
    auto eq = kv.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    std::string name(kv.substr(0, eq));
    if (opts.withheld_env.count(name) != 0) continue;
    env.emplace(std::move(name), std::string(kv.substr(eq + 1)));
  }
  if (identity && !identity->user_name.empty()) {
    env["USER"] = identity->user_name;
    env["LOGNAME"] = identity->user_name;
    if (!identity->home.empty()) env["HOME"] = identity->home;
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

/// "64KiB": `bytes` in the largest binary unit that represents it exactly (as log_output is
/// written in the config).
std::string show_size(std::uint64_t bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB"};
  std::size_t u = 0;
  while (u + 1 < std::size(units) && bytes != 0 && bytes % 1024 == 0) bytes /= 1024, ++u;
  return std::to_string(bytes) + units[u];
}

/// Keeps the last `limit` bytes of a stream (a run's stderr for its history record), whatever
/// part of it went to the log.
class tail_keeper {
 public:
  explicit tail_keeper(std::size_t limit) : limit_(limit) {}
  void feed(std::string_view data) {
    if (limit_ == 0) {
      truncated_ = truncated_ || !data.empty();
      return;
    }
    if (data.size() >= limit_) {
      truncated_ = truncated_ || data.size() > limit_ || !tail_.empty();
      tail_.assign(data.substr(data.size() - limit_));
      return;
    }
    tail_.append(data);
    if (tail_.size() > limit_) {
      tail_.erase(0, tail_.size() - limit_);
      truncated_ = true;
    }
  }
  std::string& tail() { return tail_; }
  bool truncated() const { return truncated_; }

 private:
  std::size_t limit_;
  std::string tail_;
  bool truncated_ = false;
};

/// Splits a stream into lines and logs each one tagged with the schedule, up to `cap` bytes of
/// the stream per run (a line crossing the cap is cut there); the rest is only counted, and
/// summary() says how much was dropped. Every byte still goes through feed(), so the pipe is
/// drained and the command never blocks on a full pipe.
class line_logger {
 public:
  line_logger(const std::string& schedule, std::uint64_t fence, const char* stream,
              spdlog::level::level_enum level, std::uint64_t cap)
      : schedule_(schedule), fence_(fence), stream_(stream), level_(level), cap_(cap) {}

  /// Also feeds every byte to `tail` (which must outlive this logger).
  void keep_tail(tail_keeper* tail) { tail_ = tail; }

  void feed(std::string_view data) {
    if (tail_ != nullptr) tail_->feed(data);
    total_ += data.size();
    if (capped_) return;
    if (const std::uint64_t room = cap_ - logged_; data.size() > room) {
      data = data.substr(0, static_cast<std::size_t>(room));
      capped_ = true;
    }
    logged_ += data.size();
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
    if (capped_) {
      flush();
      detail::log({.schedule = schedule_, .event = "job.output_capped", .fence = fence_})
          .warn("log_output ({}) reached on {}: the rest of this run's {} is not logged",
                show_size(cap_), stream_, stream_);
    }
  }
  void flush() {
    if (!buffer_.empty()) emit(buffer_);
    buffer_.clear();
  }
  /// At the end of the run: how much was dropped, if anything was.
  void summary() const {
    if (total_ == logged_) return;
    detail::log({.schedule = schedule_, .event = "job.output_capped", .fence = fence_})
        .warn("{} of the run: {} bytes, {} logged, {} dropped (log_output {})", stream_, total_,
              logged_, total_ - logged_, show_size(cap_));
  }

 private:
  void emit(std::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    detail::log({.schedule = schedule_, .event = "job.output", .fence = fence_})
        .log(level_, "{}: {}", stream_, line);
  }
  const std::string& schedule_;
  std::uint64_t fence_;
  const char* stream_;
  spdlog::level::level_enum level_;
  std::uint64_t cap_;
  std::uint64_t total_ = 0;   // bytes read from the stream this run
  std::uint64_t logged_ = 0;  // of them, bytes that went to the log
  bool capped_ = false;
  std::string buffer_;
  tail_keeper* tail_ = nullptr;
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

/// What the daemon learnt from a run's supervisor.
struct run_outcome {
  std::optional<int> wait_status;  // the command's, once it exited
  std::string setup_error;         // chdir/setuid/exec failed in the child
  int leftovers = 0;               // processes left behind by the command and ended
  bool done = false;               // the supervisor saw the whole tree gone
};

void run_command(const command_options& opts, const job_context& ctx) {
  const std::string& name = ctx.schedule;
  // This run's lines carry its schedule, fence and an event key (daemon/README.md, "Logs").
  auto jlog = [&](std::string_view event) {
    return detail::log({.schedule = name, .event = event, .fence = ctx.fence});
  };
  const auto identity = resolve_identity(opts.user, opts.group);
  const auto envs = child_environment(opts, ctx, identity);
  const auto resolved = resolve_program(opts.argv[0], envs);
  if (!resolved) fail(name, "cannot start '" + opts.argv[0] + "': not found in PATH");
  const std::string& program = *resolved;

  // Everything the supervisor needs is prepared here: after fork() it may only make
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
  auto [control_r, control_w] = make_pipe(name);  // 'T': end the run; closed: the daemon is gone
  auto [report_r, report_w] = make_pipe(name);    // supervisor_report records
  auto [wake_r, wake_w] = make_pipe(name, O_NONBLOCK);

  detail::supervisor_setup setup;
  setup.program = program.c_str();
  setup.argv = argv.data();
  setup.envp = envp.data();
  setup.stdin_fd = devnull.get();
  setup.stdout_fd = out_w.get();
  setup.stderr_fd = err_w.get();
  setup.stdout_read_fd = out_r.get();
  setup.stderr_read_fd = err_r.get();
  setup.control_fd = control_r.get();
  setup.report_fd = report_w.get();
  setup.daemon_pid = ::getpid();
  setup.kill_grace_ms = opts.kill_grace.count();
  if (!opts.working_directory.empty()) setup.working_directory = opts.working_directory.c_str();
  if (identity) {
    setup.switch_identity = true;
    setup.uid = identity->uid;
    setup.gid = identity->gid;
    setup.groups = identity->groups.data();
    setup.group_count = identity->groups.size();
  }

  const auto started = steady::now();
  // The parent-death signal follows the forking *thread*: the job-pool thread that runs this
  // job, which lives until the run has ended. The closing control pipe covers the process.
  const pid_t supervisor = ::fork();
  if (supervisor < 0)
    fail(name, "cannot start '" + opts.argv[0] + "': fork failed: " + errno_text(errno));
  if (supervisor == 0) detail::run_supervisor(setup);

  out_w.reset();
  err_w.reset();
  control_r.reset();
  report_w.reset();
  devnull.reset();

  std::stop_callback wake_on_stop(ctx.stop, [fd = wake_w.get()] {
    char c = 1;
    (void)!::write(fd, &c, 1);
  });
  ::fcntl(out_r.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(err_r.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(report_r.get(), F_SETFL, O_NONBLOCK);
  line_logger out_log(name, ctx.fence, "stdout", spdlog::level::info, opts.log_output);
  line_logger err_log(name, ctx.fence, "stderr", spdlog::level::warn, opts.log_output);
  tail_keeper err_tail(ctx.report ? ctx.report->output_tail_limit : 0);
  if (ctx.report) err_log.keep_tail(&err_tail);

  run_outcome outcome;
  pid_t command_pid = 0;
  const char* stop_reason = nullptr;
  std::optional<steady::time_point> term_sent;
  auto handle = [&](const detail::supervisor_report& r) {
    using rep = detail::supervisor_report;
    switch (r.kind) {
      case rep::started:
        command_pid = r.value;
        jlog("job.started")
            .info("started '{}' as pid {} (supervisor pid {}, a subreaper)", program, command_pid,
                  supervisor);
        break;
      case rep::setup_failed:
        outcome.setup_error =
            std::string(detail::describe_stage(r.stage)) + ": " + errno_text(r.value);
        if (r.stage == rep::stage_exec) outcome.setup_error = errno_text(r.value);
        if (r.stage == rep::stage_chdir)
          outcome.setup_error = "cannot change to the working directory '" +
                                opts.working_directory + "': " + errno_text(r.value);
        break;
      case rep::exited:
        outcome.wait_status = r.value;
        break;
      case rep::terminating:
        if (r.stage == rep::reason_leftovers) {
          outcome.leftovers = r.value;
          if (r.value > 0)
            jlog("job.leftovers")
                .warn("the command exited and left {} process(es) behind: sending them SIGTERM",
                      r.value);
        } else if (r.stage == rep::reason_signal) {
          jlog("job.terminating").warn("the supervisor was signalled: ending the run's processes");
        }
        break;
      case rep::killing:
        jlog("job.killing")
            .warn("still running {} ms after SIGTERM: sending SIGKILL to {} process(es) of the run",
                  opts.kill_grace.count(), r.value);
        break;
      case rep::done:
        outcome.done = true;
        if (outcome.leftovers > 0)
          jlog("job.leftovers")
              .warn("killed processes left behind by the command: {}", outcome.leftovers);
        break;
      default:
        break;
    }
  };
  // Reads what the supervisor said; false once it closed its end (it exited).
  auto read_reports = [&]() -> bool {
    detail::supervisor_report r;
    while (true) {
      const ssize_t n = ::read(report_r.get(), &r, sizeof r);
      if (n == static_cast<ssize_t>(sizeof r)) {
        handle(r);
        continue;
      }
      if (n < 0 && errno == EINTR) continue;
      return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
    }
  };

  bool supervisor_open = true;
  while (supervisor_open) {
    const auto now = steady::now();
    if (!term_sent && (ctx.stop.stop_requested() || now >= ctx.deadline)) {
      // A stop that comes with the deadline passed is the timeout (the scheduler asks for it too).
      stop_reason = now >= ctx.deadline ? "timeout" : "stop requested";
      jlog("job.terminating")
          .info("{}: sending SIGTERM to every process of the run (kill_grace {} ms)", stop_reason,
                opts.kill_grace.count());
      const char t = 'T';
      (void)!::write(control_w.get(), &t, 1);
      term_sent = now;
    }
    // Sleep until output, a report, a stop request or the timeout.
    steady::time_point wake = now + milliseconds{1000};
    if (!term_sent && ctx.deadline < wake) wake = ctx.deadline;
    const int timeout_ms = static_cast<int>(
        std::clamp<long long>(std::chrono::ceil<milliseconds>(wake - now).count(), 0, 1000));
    pollfd fds[4] = {{out_r ? out_r.get() : -1, POLLIN, 0},
                     {err_r ? err_r.get() : -1, POLLIN, 0},
                     {report_r.get(), POLLIN, 0},
                     {wake_r.get(), POLLIN, 0}};
    if (::poll(fds, 4, timeout_ms) < 0 && errno != EINTR)
      jlog("job.error").warn("poll failed: {}", errno_text(errno));
    if (out_r && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) && !drain(out_r.get(), out_log))
      out_r.reset();
    if (err_r && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) && !drain(err_r.get(), err_log))
      err_r.reset();
    if (fds[2].revents & (POLLIN | POLLHUP | POLLERR)) supervisor_open = read_reports();
    if (fds[3].revents & POLLIN) {
      char buf[64];
      while (::read(wake_r.get(), buf, sizeof buf) > 0) {
      }
    }
  }
  int supervisor_status = 0;
  while (::waitpid(supervisor, &supervisor_status, 0) < 0 && errno == EINTR) {
  }
  // Every writer of the output pipes is gone now: read them to the end.
  if (out_r) drain(out_r.get(), out_log);
  if (err_r) drain(err_r.get(), err_log);
  out_log.flush();
  err_log.flush();
  out_log.summary();
  err_log.summary();
  if (ctx.report) {
    ctx.report->output_tail = std::move(err_tail.tail());
    ctx.report->output_truncated = err_tail.truncated();
  }
  if (!outcome.done) {
    // The supervisor died without seeing the tree gone (killed from outside): the command's
    // group is the best we still know.
    if (command_pid > 0) ::kill(-command_pid, SIGKILL);
    jlog("job.error")
        .error("the run's supervisor (pid {}) ended unexpectedly ({})", supervisor,
               WIFSIGNALED(supervisor_status) ? signal_name(WTERMSIG(supervisor_status))
                                              : "status " + std::to_string(supervisor_status));
  }
  if (!outcome.setup_error.empty())
    fail(name, "cannot start '" + program + "': " + outcome.setup_error);
  if (!outcome.wait_status) fail(name, "'" + opts.argv[0] + "': the exit status is unknown");

  const double took = seconds(steady::now() - started);
  const int status = *outcome.wait_status;
  if (ctx.report) {
    if (WIFEXITED(status)) ctx.report->exit_status = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) ctx.report->signal = WTERMSIG(status);
  }
  std::string result;
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    if (code == 0) {
      jlog("job.exited")
          .info("exited with status 0{} after {:.3f} s",
                stop_reason ? std::string(" (") + stop_reason + ")" : std::string(), took);
      return;
    }
    result = "exited with status " + std::to_string(code);
  } else if (WIFSIGNALED(status)) {
    result = "killed by " + signal_name(WTERMSIG(status));
  } else {
    result = "ended with wait status " + std::to_string(status);
  }
  char took_text[32];
  std::snprintf(took_text, sizeof took_text, "%.3f", took);
  if (stop_reason) result += std::string(" (") + stop_reason + ")";
  result += std::string(" after ") + took_text + " s";
  jlog(WIFSIGNALED(status) ? "job.killed" : "job.exited").warn("{}", result);
  throw command_error("'" + opts.argv[0] + "' " + result);
}

}  // namespace

namespace {

bool all_digits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

/// getpwnam_r / getpwuid_r for a name or a number; nullopt when there is no such user.
std::optional<std::tuple<uid_t, gid_t, std::string, std::string>> find_user(const std::string& u) {
  std::vector<char> buf(16384);
  struct passwd pw {};
  struct passwd* found = nullptr;
  int rc = all_digits(u) ? ::getpwuid_r(static_cast<uid_t>(std::stoul(u)), &pw, buf.data(),
                                        buf.size(), &found)
                         : ::getpwnam_r(u.c_str(), &pw, buf.data(), buf.size(), &found);
  if (rc != 0 || found == nullptr) return std::nullopt;
  return std::make_tuple(pw.pw_uid, pw.pw_gid, std::string(pw.pw_name), std::string(pw.pw_dir));
}

/// getgrnam_r for a name; a number is taken as it is.
std::optional<gid_t> find_group(const std::string& g) {
  if (all_digits(g)) return static_cast<gid_t>(std::stoul(g));
  std::vector<char> buf(16384);
  struct group gr {};
  struct group* found = nullptr;
  if (::getgrnam_r(g.c_str(), &gr, buf.data(), buf.size(), &found) != 0 || found == nullptr)
    return std::nullopt;
  return gr.gr_gid;
}

}  // namespace

std::optional<command_identity> resolve_identity(const std::optional<std::string>& user,
                                                 const std::optional<std::string>& group) {
  if (!user && !group) return std::nullopt;
  command_identity id;
  id.uid = ::geteuid();
  id.gid = ::getegid();
  if (user) {
    if (user->empty() || user->size() > 256)
      throw std::invalid_argument("user: must be a user name or id");
    auto found = find_user(*user);
    if (!found) throw std::invalid_argument("user '" + *user + "': no such user");
    std::tie(id.uid, id.gid, id.user_name, id.home) = *found;
  }
  if (group) {
    if (group->empty() || group->size() > 256)
      throw std::invalid_argument("group: must be a group name or id");
    auto gid = find_group(*group);
    if (!gid) throw std::invalid_argument("group '" + *group + "': no such group");
    id.gid = *gid;
  }
  if (!id.user_name.empty()) {
    int count = 64;
    std::vector<gid_t> groups(static_cast<std::size_t>(count));
    while (::getgrouplist(id.user_name.c_str(), id.gid, groups.data(), &count) < 0) {
      if (count > 65536) throw std::invalid_argument("user '" + *user + "': too many groups");
      groups.resize(static_cast<std::size_t>(count) * 2);
      count = static_cast<int>(groups.size());
    }
    groups.resize(static_cast<std::size_t>(count));
    id.groups = std::move(groups);
  } else {
    id.groups = {id.gid};
  }
  if (::geteuid() != 0) {
    if (id.uid != ::geteuid())
      throw std::invalid_argument("user '" + user.value_or("") +
                                  "': switching user needs the daemon to run as root (it runs as "
                                  "uid " +
                                  std::to_string(::geteuid()) + ")");
    if (id.gid != ::getegid())
      throw std::invalid_argument("group '" + group.value_or(std::to_string(id.gid)) +
                                  "': switching group needs the daemon to run as root (it runs "
                                  "as gid " +
                                  std::to_string(::getegid()) + ")");
    return std::nullopt;  // already this identity: nothing to switch
  }
  return id;
}

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
  (void)resolve_identity(opts.user, opts.group);  // fail here, not at the first fire
  if (!opts.working_directory.empty() && opts.working_directory.find('\0') != std::string::npos)
    throw std::invalid_argument("command job: working_directory contains a NUL character");
  auto shared = std::make_shared<const command_options>(std::move(opts));
  return [shared](const job_context& ctx) { run_command(*shared, ctx); };
}

}  // namespace baton
