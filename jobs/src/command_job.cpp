// The command job: fork a per-run supervisor (supervisor.cpp) that execs the command, log its
// output line by line, and tell the supervisor when the run must end. The job-pool thread that
// runs it waits with poll() on the output pipes, the supervisor's report pipe and a wake-up
// pipe; no extra threads.
#include "baton/jobs/command_job.hpp"

#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <spawn.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <ctime>
#include <exception>
#include <functional>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string_view>
#include <system_error>
#include <thread>
#include <tuple>
#include <unordered_map>

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

/// The supervisor program for `opts`: its own setting, else the default; empty: fork.
const std::string& supervisor_for(const command_options& opts) {
  return opts.supervisor ? *opts.supervisor : default_supervisor_program();
}

/// Starts `program` (baton-supervisor) with posix_spawn(): the descriptors of `setup` at the
/// numbers supervisor_fd names, everything else in its argv, the command's environment as its
/// own. Returns the pid, or -1 with errno set.
pid_t spawn_supervisor(const std::string& program, const detail::supervisor_setup& setup) {
  namespace sfd = detail::supervisor_fd;
  // Copies at 10 and up first: a source numbered 0..6 must not be overwritten by an earlier
  // dup2 onto its number (the copies are close-on-exec; dup2 clears that on the target).
  const int sources[sfd::count] = {setup.stdin_fd,       setup.stdout_fd,      setup.stderr_fd,
                                   setup.stdout_read_fd, setup.stderr_read_fd, setup.control_fd,
                                   setup.report_fd};
  unique_fd lifted[sfd::count];
  for (int i = 0; i < sfd::count; ++i) {
    lifted[i] = unique_fd(::fcntl(sources[i], F_DUPFD_CLOEXEC, 10));
    if (!lifted[i]) return -1;
  }
  std::vector<std::string> args{program, std::to_string(setup.daemon_pid),
                                std::to_string(setup.kill_grace_ms),
                                setup.working_directory ? setup.working_directory : "-"};
  if (setup.switch_identity) {
    args.push_back(std::to_string(setup.uid));
    args.push_back(std::to_string(setup.gid));
    std::string groups;
    for (std::size_t i = 0; i < setup.group_count; ++i)
      groups += (i ? "," : "") + std::to_string(setup.groups[i]);
    args.push_back(groups);
  } else {
    args.insert(args.end(), {"-", "-", ""});
  }
  std::size_t env_count = 0;
  for (char* const* e = setup.envp; *e; ++e) ++env_count;
  args.push_back(std::to_string(env_count));
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  // The command's environment goes as arguments: the supervisor's own stays empty, so that the
  // run's variables mark only the run's processes.
  for (char* const* e = setup.envp; *e; ++e) argv.push_back(*e);
  argv.push_back(const_cast<char*>(setup.program));
  for (char* const* a = setup.argv; *a; ++a) argv.push_back(*a);
  argv.push_back(nullptr);
  char* no_env[] = {nullptr};

  posix_spawn_file_actions_t actions;
  if (int e = ::posix_spawn_file_actions_init(&actions); e != 0) {
    errno = e;
    return -1;
  }
  int rc = 0;
  for (int i = 0; i < sfd::count && rc == 0; ++i)
    rc = ::posix_spawn_file_actions_adddup2(&actions, lifted[i].get(), i);
  pid_t pid = -1;
  if (rc == 0) rc = ::posix_spawn(&pid, program.c_str(), &actions, nullptr, argv.data(), no_env);
  ::posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    errno = rc;
    return -1;
  }
  return pid;
}

/// What the daemon learnt from a run's supervisor.
struct run_outcome {
  std::optional<int> wait_status;  // the command's, once it exited
  std::string setup_error;         // chdir/setuid/exec failed in the child
  int leftovers = 0;               // processes left behind by the command and ended
  bool done = false;               // the supervisor saw the whole tree gone
};

/// One run of a command: its supervisor, the pipes to it, the output loggers and what the
/// supervisor reported. Driven either by run_command() on the calling thread (poll) or by the
/// command_reactor (epoll, one thread for every run of the process): start(), then on_*() as
/// its descriptors get ready and check_stop() on a stop request or at wake_at(), until
/// supervisor_open() is false; then finish().
class command_run {
 public:
  command_run(std::shared_ptr<const command_options> opts, job_context ctx)
      : opts_(std::move(opts)),
        ctx_(std::move(ctx)),
        out_log_(ctx_.schedule, ctx_.fence, "stdout", spdlog::level::info, opts_->log_output),
        err_log_(ctx_.schedule, ctx_.fence, "stderr", spdlog::level::warn, opts_->log_output),
        err_tail_(ctx_.report ? ctx_.report->output_tail_limit : 0) {
    if (ctx_.report) err_log_.keep_tail(&err_tail_);
  }
  command_run(const command_run&) = delete;
  command_run& operator=(const command_run&) = delete;

  /// Starts the supervisor. Throws command_error when it cannot.
  void start();

  int out_fd() const { return out_r_.get(); }
  int err_fd() const { return err_r_.get(); }
  int report_fd() const { return report_r_.get(); }
  int wake_fd() const { return wake_r_.get(); }
  /// Read what is ready; false at the end of the stream (then close_out()/close_err()).
  bool read_out() { return drain(out_r_.get(), out_log_); }
  bool read_err() { return drain(err_r_.get(), err_log_); }
  void close_out() { out_r_.reset(); }
  void close_err() { err_r_.reset(); }
  /// Reads the supervisor's reports; false once it closed its end (it exited).
  bool read_reports();
  void clear_wake() {
    char buf[64];
    while (::read(wake_r_.get(), buf, sizeof buf) > 0) {
    }
  }
  /// Tells the supervisor to end the run when a stop was requested or the deadline passed.
  void check_stop(steady::time_point now);
  /// When check_stop() must look again without a wake-up (the deadline), else max().
  steady::time_point wake_at() const {
    return term_sent_ ? steady::time_point::max() : ctx_.deadline;
  }
  /// Reaps the supervisor, logs the rest of the output and the result. Throws command_error
  /// when the run failed.
  void finish();

 private:
  detail::field_logger jlog(std::string_view event) const {
    return detail::log({.schedule = ctx_.schedule, .event = event, .fence = ctx_.fence});
  }
  void handle(const detail::supervisor_report& r);

  std::shared_ptr<const command_options> opts_;
  job_context ctx_;
  std::string program_;
  unique_fd out_r_, err_r_, control_w_, report_r_, wake_r_, wake_w_;
  line_logger out_log_;
  line_logger err_log_;
  tail_keeper err_tail_;
  std::optional<std::stop_callback<std::function<void()>>> wake_on_stop_;
  steady::time_point started_{};
  pid_t supervisor_ = -1;
  run_outcome outcome_;
  pid_t command_pid_ = 0;
  const char* stop_reason_ = nullptr;
  bool term_sent_ = false;
};

void command_run::start() {
  const command_options& opts = *opts_;
  const std::string& name = ctx_.schedule;
  const auto identity = resolve_identity(opts.user, opts.group);
  const auto envs = child_environment(opts, ctx_, identity);
  const auto resolved = resolve_program(opts.argv[0], envs);
  if (!resolved) fail(name, "cannot start '" + opts.argv[0] + "': not found in PATH");
  program_ = *resolved;

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
  setup.program = program_.c_str();
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

  started_ = steady::now();
  // The parent-death signal follows the forking (spawning) *thread*. The closing control pipe
  // covers the process: the daemon's end closes when the daemon dies, whichever thread spawned.
  const std::string& supervisor_program = supervisor_for(opts);
  if (!supervisor_program.empty()) {
    supervisor_ = spawn_supervisor(supervisor_program, setup);
    if (supervisor_ < 0)
      fail(name, "cannot start '" + opts.argv[0] + "': cannot start the supervisor '" +
                     supervisor_program + "': " + errno_text(errno));
  } else {
    supervisor_ = ::fork();
    if (supervisor_ < 0)
      fail(name, "cannot start '" + opts.argv[0] + "': fork failed: " + errno_text(errno));
    if (supervisor_ == 0) detail::run_supervisor(setup);
  }

  out_r_ = std::move(out_r);
  err_r_ = std::move(err_r);
  control_w_ = std::move(control_w);
  report_r_ = std::move(report_r);
  wake_r_ = std::move(wake_r);
  wake_w_ = std::move(wake_w);
  wake_on_stop_.emplace(ctx_.stop, [fd = wake_w_.get()] {
    char c = 1;
    (void)!::write(fd, &c, 1);
  });
  ::fcntl(out_r_.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(err_r_.get(), F_SETFL, O_NONBLOCK);
  ::fcntl(report_r_.get(), F_SETFL, O_NONBLOCK);
}

void command_run::handle(const detail::supervisor_report& r) {
  using rep = detail::supervisor_report;
  const command_options& opts = *opts_;
  switch (r.kind) {
    case rep::started:
      command_pid_ = r.value;
      jlog("job.started")
          .info("started '{}' as pid {} (supervisor pid {}, a subreaper)", program_, command_pid_,
                supervisor_);
      break;
    case rep::setup_failed:
      outcome_.setup_error =
          std::string(detail::describe_stage(r.stage)) + ": " + errno_text(r.value);
      if (r.stage == rep::stage_exec) outcome_.setup_error = errno_text(r.value);
      if (r.stage == rep::stage_chdir)
        outcome_.setup_error = "cannot change to the working directory '" + opts.working_directory +
                               "': " + errno_text(r.value);
      break;
    case rep::exited:
      outcome_.wait_status = r.value;
      break;
    case rep::terminating:
      if (r.stage == rep::reason_leftovers) {
        outcome_.leftovers = r.value;
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
      outcome_.done = true;
      if (outcome_.leftovers > 0)
        jlog("job.leftovers")
            .warn("killed processes left behind by the command: {}", outcome_.leftovers);
      break;
    default:
      break;
  }
}

bool command_run::read_reports() {
  detail::supervisor_report r;
  while (true) {
    const ssize_t n = ::read(report_r_.get(), &r, sizeof r);
    if (n == static_cast<ssize_t>(sizeof r)) {
      handle(r);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    return n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
  }
}

void command_run::check_stop(steady::time_point now) {
  if (term_sent_ || !(ctx_.stop.stop_requested() || now >= ctx_.deadline)) return;
  // A stop that comes with the deadline passed is the timeout (the scheduler asks for it too).
  stop_reason_ = now >= ctx_.deadline ? "timeout" : "stop requested";
  jlog("job.terminating")
      .info("{}: sending SIGTERM to every process of the run (kill_grace {} ms)", stop_reason_,
            opts_->kill_grace.count());
  const char t = 'T';
  (void)!::write(control_w_.get(), &t, 1);
  term_sent_ = true;
}

void command_run::finish() {
  const command_options& opts = *opts_;
  const std::string& name = ctx_.schedule;
  wake_on_stop_.reset();
  int supervisor_status = 0;
  while (::waitpid(supervisor_, &supervisor_status, 0) < 0 && errno == EINTR) {
  }
  // Every writer of the output pipes is gone now: read them to the end.
  if (out_r_) drain(out_r_.get(), out_log_);
  if (err_r_) drain(err_r_.get(), err_log_);
  out_log_.flush();
  err_log_.flush();
  out_log_.summary();
  err_log_.summary();
  if (ctx_.report) {
    ctx_.report->output_tail = std::move(err_tail_.tail());
    ctx_.report->output_truncated = err_tail_.truncated();
  }
  if (!outcome_.done) {
    // The supervisor died without seeing the tree gone (killed from outside): the command's
    // group is the best we still know.
    if (command_pid_ > 0) ::kill(-command_pid_, SIGKILL);
    jlog("job.error")
        .error("the run's supervisor (pid {}) ended unexpectedly ({})", supervisor_,
               WIFSIGNALED(supervisor_status) ? signal_name(WTERMSIG(supervisor_status))
                                              : "status " + std::to_string(supervisor_status));
  }
  if (!outcome_.setup_error.empty())
    fail(name, "cannot start '" + program_ + "': " + outcome_.setup_error);
  if (!outcome_.wait_status) fail(name, "'" + opts.argv[0] + "': the exit status is unknown");

  const double took = seconds(steady::now() - started_);
  const int status = *outcome_.wait_status;
  if (ctx_.report) {
    if (WIFEXITED(status)) ctx_.report->exit_status = WEXITSTATUS(status);
    if (WIFSIGNALED(status)) ctx_.report->signal = WTERMSIG(status);
  }
  std::string result;
  if (WIFEXITED(status)) {
    const int code = WEXITSTATUS(status);
    if (code == 0) {
      jlog("job.exited")
          .info("exited with status 0{} after {:.3f} s",
                stop_reason_ ? std::string(" (") + stop_reason_ + ")" : std::string(), took);
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
  if (stop_reason_) result += std::string(" (") + stop_reason_ + ")";
  result += std::string(" after ") + took_text + " s";
  jlog(WIFSIGNALED(status) ? "job.killed" : "job.exited").warn("{}", result);
  throw command_error("'" + opts.argv[0] + "' " + result);
}

/// A run on the calling thread: poll() on its descriptors until the supervisor is gone.
void run_command(std::shared_ptr<const command_options> opts, const job_context& ctx) {
  command_run run(std::move(opts), ctx);
  run.start();
  bool supervisor_open = true;
  while (supervisor_open) {
    const auto now = steady::now();
    run.check_stop(now);
    // Sleep until output, a report, a stop request or the timeout.
    const steady::time_point wake = std::min(now + milliseconds{1000}, run.wake_at());
    const int timeout_ms = static_cast<int>(
        std::clamp<long long>(std::chrono::ceil<milliseconds>(wake - now).count(), 0, 1000));
    pollfd fds[4] = {{run.out_fd(), POLLIN, 0},
                     {run.err_fd(), POLLIN, 0},
                     {run.report_fd(), POLLIN, 0},
                     {run.wake_fd(), POLLIN, 0}};
    if (::poll(fds, 4, timeout_ms) < 0 && errno != EINTR)
      detail::log({.schedule = ctx.schedule, .event = "job.error", .fence = ctx.fence})
          .warn("poll failed: {}", errno_text(errno));
    if (run.out_fd() >= 0 && (fds[0].revents & (POLLIN | POLLHUP | POLLERR)) && !run.read_out())
      run.close_out();
    if (run.err_fd() >= 0 && (fds[1].revents & (POLLIN | POLLHUP | POLLERR)) && !run.read_err())
      run.close_err();
    if (fds[2].revents & (POLLIN | POLLHUP | POLLERR)) supervisor_open = run.read_reports();
    if (fds[3].revents & POLLIN) run.clear_wake();
  }
  run.finish();
}

/// Watches every asynchronous command run of the process on one thread (epoll): their output,
/// their supervisors' reports, stop requests and timeouts. One per process, never destroyed;
/// its thread starts with the first run and ends after a second without any (and starts again
/// with the next), so a process that runs no command has no such thread.
class command_reactor {
 public:
  using done_function = std::function<void(std::exception_ptr)>;

  static command_reactor& get() {
    static command_reactor* const instance = new command_reactor();  // never destroyed
    return *instance;
  }

  /// Watches `run` (started) until its supervisor is gone, then finishes it and calls `done`
  /// on the reactor thread.
  void add(std::unique_ptr<command_run> run, done_function done) {
    auto e = std::make_unique<entry>();
    e->run = std::move(run);
    e->done = std::move(done);
    std::lock_guard lock(mutex_);
    incoming_.push_back(std::move(e));
    if (!running_) {
      // Detached: the previous thread decided to end under this lock and touches nothing after
      // that, and a thread that ended but was never joined is a leak (ThreadSanitizer reports
      // the last one at exit).
      running_ = true;
      std::thread([this] { loop(); }).detach();
    }
    notify();
  }

 private:
  /// The thread ends after this long without a run.
  static constexpr milliseconds idle_exit{1000};
  enum which : int { out = 0, err = 1, report = 2, wake = 3 };
  struct entry;
  struct watch {
    entry* owner = nullptr;
    which what = out;
  };
  struct entry {
    std::unique_ptr<command_run> run;
    done_function done;
    watch watches[4];
    std::multimap<steady::time_point, entry*>::iterator deadline{};
    bool timed = false;
  };

  command_reactor()
      : epoll_(::epoll_create1(EPOLL_CLOEXEC)), event_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {
    if (!epoll_ || !event_)
      throw std::system_error(errno, std::generic_category(), "command jobs: epoll/eventfd");
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;
    if (::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, event_.get(), &ev) != 0)
      throw std::system_error(errno, std::generic_category(), "command jobs: epoll_ctl");
  }

  void notify() {
    const std::uint64_t one = 1;
    (void)!::write(event_.get(), &one, sizeof one);
  }

  void watch_fd(entry& e, which w, int fd) {
    e.watches[w] = {&e, w};
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = &e.watches[w];
    ::epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev);
  }
  void unwatch_fd(int fd) {
    if (fd >= 0) ::epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, fd, nullptr);
  }

  void arm_deadline(entry& e) {
    if (e.timed) deadlines_.erase(e.deadline);
    e.timed = false;
    const auto at = e.run->wake_at();
    if (at == steady::time_point::max()) return;
    e.deadline = deadlines_.emplace(at, &e);
    e.timed = true;
  }

  void take_incoming() {
    std::vector<std::unique_ptr<entry>> added;
    {
      std::lock_guard lock(mutex_);
      added.swap(incoming_);
    }
    for (auto& e : added) {
      entry& ref = *e;
      watch_fd(ref, out, ref.run->out_fd());
      watch_fd(ref, err, ref.run->err_fd());
      watch_fd(ref, report, ref.run->report_fd());
      watch_fd(ref, wake, ref.run->wake_fd());
      ref.run->check_stop(steady::now());  // a stop requested before we watched
      arm_deadline(ref);
      runs_.emplace(&ref, std::move(e));
    }
  }

  void end(entry& e) {
    for (int fd : {e.run->out_fd(), e.run->err_fd(), e.run->report_fd(), e.run->wake_fd()})
      unwatch_fd(fd);
    if (e.timed) deadlines_.erase(e.deadline);
    e.timed = false;
    std::exception_ptr error;
    try {
      e.run->finish();
    } catch (...) {
      error = std::current_exception();
    }
    auto owned = std::move(runs_.at(&e));
    runs_.erase(&e);
    auto done = std::move(owned->done);
    owned.reset();  // the run (its descriptors, its context) goes before done() says so
    try {
      done(std::move(error));  // the reactor keeps no reference to the exception
    } catch (...) {
    }
  }

  void loop() {
    epoll_event events[64];
    auto idle_since = steady::now();
    for (;;) {
      take_incoming();
      if (!runs_.empty()) idle_since = steady::now();
      if (runs_.empty() && steady::now() - idle_since >= idle_exit) {
        std::lock_guard lock(mutex_);
        if (incoming_.empty()) {
          running_ = false;
          return;
        }
        continue;
      }
      int timeout = 1000;
      if (!deadlines_.empty()) {
        const auto left =
            std::chrono::ceil<milliseconds>(deadlines_.begin()->first - steady::now());
        timeout = static_cast<int>(std::clamp<long long>(left.count(), 0, 1000));
      }
      const int n = ::epoll_wait(epoll_.get(), events, 64, timeout);
      std::vector<entry*> ended;
      for (int i = 0; i < n; ++i) {
        auto* w = static_cast<watch*>(events[i].data.ptr);
        if (w == nullptr) {
          std::uint64_t count;
          (void)!::read(event_.get(), &count, sizeof count);
          continue;
        }
        entry& e = *w->owner;
        if (std::find(ended.begin(), ended.end(), &e) != ended.end()) continue;
        command_run& run = *e.run;
        switch (w->what) {
          case out:
            if (!run.read_out()) {
              unwatch_fd(run.out_fd());
              run.close_out();
            }
            break;
          case err:
            if (!run.read_err()) {
              unwatch_fd(run.err_fd());
              run.close_err();
            }
            break;
          case report:
            if (!run.read_reports()) ended.push_back(&e);
            break;
          case wake:
            run.clear_wake();
            run.check_stop(steady::now());
            arm_deadline(e);
            break;
        }
      }
      const auto now = steady::now();
      while (!deadlines_.empty() && deadlines_.begin()->first <= now) {
        entry& e = *deadlines_.begin()->second;
        deadlines_.erase(deadlines_.begin());
        e.timed = false;
        e.run->check_stop(now);
        arm_deadline(e);
      }
      // Ended runs last: a watch of theirs may still be among this round's events.
      for (entry* e : ended) end(*e);
    }
  }

  unique_fd epoll_;
  unique_fd event_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<entry>> incoming_;  // guarded by mutex_
  bool running_ = false;                          // a thread runs loop(); guarded by mutex_
  // Reactor thread only.
  std::unordered_map<entry*, std::unique_ptr<entry>> runs_;
  std::multimap<steady::time_point, entry*> deadlines_;
};

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

const std::string& default_supervisor_program() {
  static const std::string found = [] {
    char exe[PATH_MAX];
    const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n <= 0) return std::string();
    std::string dir(exe, static_cast<std::size_t>(n));
    dir.erase(dir.rfind('/') == std::string::npos ? 0 : dir.rfind('/'));
    for (const char* rel : {"/baton-supervisor", "/../libexec/baton/baton-supervisor"})
      if (executable_file(dir + rel)) return dir + rel;
    return std::string();
  }();
  return found;
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
  if (opts.supervisor && opts.supervisor->find('\0') != std::string::npos)
    throw std::invalid_argument("command job: supervisor contains a NUL character");
  auto shared = std::make_shared<const command_options>(std::move(opts));
  return [shared](const job_context& ctx) { run_command(shared, ctx); };
}

async_job_function make_async_command_job(command_options opts) {
  // The same checks, and the same options, as the synchronous job.
  (void)make_command_job(opts);
  auto shared = std::make_shared<const command_options>(std::move(opts));
  return [shared](const job_context& ctx, std::function<void(std::exception_ptr)> done) {
    auto run = std::make_unique<command_run>(shared, ctx);
    run->start();  // throws when the run cannot start: `done` is not called
    command_reactor::get().add(std::move(run), std::move(done));
  };
}

}  // namespace baton
