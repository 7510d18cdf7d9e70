// The per-run supervisor. Runs in a forked child of the (multi-threaded) daemon, so it calls only
// async-signal-safe functions: raw system calls, no allocation, no locks, no logging (it reports
// to the daemon through a pipe instead).
#include "supervisor.hpp"

#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <initializer_list>

namespace baton::detail {

const char* describe_stage(std::int32_t stage) noexcept {
  switch (stage) {
    case supervisor_report::stage_fork:
      return "cannot fork";
    case supervisor_report::stage_chdir:
      return "cannot change to the working directory";
    case supervisor_report::stage_groups:
      return "cannot set the supplementary groups";
    case supervisor_report::stage_gid:
      return "cannot set the group id";
    case supervisor_report::stage_uid:
      return "cannot set the user id";
    default:
      return "cannot execute";
  }
}

namespace {

using report_t = supervisor_report;

/// Most processes one scan of /proc considers (the kill loop scans again until none is left).
constexpr std::size_t max_processes = 32768;

long long now_ms() noexcept {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1'000'000;
}

void send_report(int fd, std::int32_t kind, std::int32_t value, std::int32_t stage = 0) noexcept {
  const report_t r{kind, value, stage, 0};
  // Non-blocking: a daemon that stopped reading must not keep us from ending the run.
  while (::write(fd, &r, sizeof r) < 0 && errno == EINTR) {
  }
}

bool parse_pid(const char* s, pid_t& out) noexcept {
  if (*s == '\0') return false;
  long long v = 0;
  for (; *s; ++s) {
    if (*s < '0' || *s > '9') return false;
    v = v * 10 + (*s - '0');
    if (v > 0x7fffffff) return false;
  }
  out = static_cast<pid_t>(v);
  return true;
}

/// The parent pid from /proc/<pid>/stat ("pid (comm) state ppid ..."; comm may hold ')').
bool read_ppid(pid_t pid, pid_t& ppid) noexcept {
  char path[48] = "/proc/";
  char digits[16];
  int n = 0;
  for (pid_t v = pid; v > 0 && n < 15; v /= 10) digits[n++] = static_cast<char>('0' + v % 10);
  std::size_t p = 6;
  while (n > 0) path[p++] = digits[--n];
  const char tail[] = "/stat";
  for (char c : tail) path[p++] = c;
  const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  ssize_t got;
  do got = ::read(fd, buf, sizeof buf - 1);
  while (got < 0 && errno == EINTR);
  ::close(fd);
  if (got <= 0) return false;
  buf[got] = '\0';
  const char* close = nullptr;
  for (const char* c = buf; *c; ++c)
    if (*c == ')') close = c;
  if (!close || close[1] != ' ' || close[2] == '\0' || close[3] != ' ') return false;
  long long v = 0;
  const char* d = close + 4;
  if (*d < '0' || *d > '9') return false;
  for (; *d >= '0' && *d <= '9'; ++d) v = v * 10 + (*d - '0');
  ppid = static_cast<pid_t>(v);
  return true;
}

struct linux_dirent64 {
  ino64_t d_ino;
  off64_t d_off;
  unsigned short d_reclen;
  unsigned char d_type;
  char d_name[];
};

/// Every process's (pid, parent) in an anonymous mapping made once.
class process_table {
 public:
  bool init() noexcept {
    void* mem = ::mmap(nullptr, max_processes * (2 * sizeof(pid_t) + 1), PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (mem == MAP_FAILED) return false;
    pid_ = static_cast<pid_t*>(mem);
    ppid_ = pid_ + max_processes;
    mark_ = reinterpret_cast<unsigned char*>(ppid_ + max_processes);
    return true;
  }

  /// Sends `sig` to every descendant of `self`; returns how many were signalled.
  int signal_descendants(pid_t self, int sig) noexcept {
    if (!pid_) return 0;
    const std::size_t n = scan();
    for (std::size_t i = 0; i < n; ++i) mark_[i] = ppid_[i] == self;
    // Mark children of marked processes until nothing changes (the tree is shallow).
    for (bool changed = true; changed;) {
      changed = false;
      for (std::size_t i = 0; i < n; ++i) {
        if (mark_[i]) continue;
        for (std::size_t j = 0; j < n; ++j)
          if (mark_[j] && pid_[j] == ppid_[i]) {
            mark_[i] = 1;
            changed = true;
            break;
          }
      }
    }
    int count = 0;
    for (std::size_t i = 0; i < n; ++i)
      if (mark_[i] && ::kill(pid_[i], sig) == 0) ++count;
    return count;
  }

 private:
  std::size_t scan() noexcept {
    const int dir = ::open("/proc", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0) return 0;
    alignas(8) char buf[8192];
    std::size_t n = 0;
    while (true) {
      const long got = ::syscall(SYS_getdents64, dir, buf, sizeof buf);
      if (got <= 0) break;
      for (long off = 0; off < got;) {
        const auto* d = reinterpret_cast<const linux_dirent64*>(buf + off);
        off += d->d_reclen;
        pid_t pid = 0;
        pid_t ppid = 0;
        if (n >= max_processes || !parse_pid(d->d_name, pid) || !read_ppid(pid, ppid)) continue;
        pid_[n] = pid;
        ppid_[n] = ppid;
        ++n;
      }
    }
    ::close(dir);
    return n;
  }

  pid_t* pid_ = nullptr;
  pid_t* ppid_ = nullptr;
  unsigned char* mark_ = nullptr;
};

/// Closes every descriptor from 3 up except the `keep` ones (sorted ascending, all >= 3).
void close_all_but(const int* keep, int count) noexcept {
  unsigned from = 3;
  for (int i = 0; i <= count; ++i) {
    const unsigned to = i < count ? static_cast<unsigned>(keep[i]) : ~0U;
    if (to > from) {
      if (::syscall(SYS_close_range, from, to - 1, 0) != 0)
        for (unsigned fd = from; fd < to && fd < 65536; ++fd) ::close(static_cast<int>(fd));
    }
    from = to + 1;
  }
}

/// Moves `fd` to a number >= 10 (close-on-exec), so dup2 onto 0/1/2 cannot clobber it.
int lift(int fd) noexcept { return ::fcntl(fd, F_DUPFD_CLOEXEC, 10); }

[[noreturn]] void exec_command(const supervisor_setup& s, int report_fd,
                               pid_t supervisor) noexcept {
  sigset_t none;
  sigemptyset(&none);
  struct sigaction dfl {};
  dfl.sa_handler = SIG_DFL;
  sigemptyset(&dfl.sa_mask);
  ::sigaction(SIGPIPE, &dfl, nullptr);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::setpgid(0, 0);
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != supervisor) ::_exit(127);
  auto fail = [&](std::int32_t stage) {
    send_report(report_fd, report_t::setup_failed, errno, stage);
    ::_exit(127);
  };
  if (s.switch_identity) {
    if (::setgroups(s.group_count, s.groups) != 0) fail(report_t::stage_groups);
    if (::setgid(s.gid) != 0) fail(report_t::stage_gid);
    if (::setuid(s.uid) != 0) fail(report_t::stage_uid);
  }
  if (s.working_directory && ::chdir(s.working_directory) != 0) fail(report_t::stage_chdir);
  ::execve(s.program, s.argv, s.envp);
  fail(report_t::stage_exec);
  ::_exit(127);
}

}  // namespace

void run_supervisor(const supervisor_setup& s) noexcept {
  // Signals: default handlers (SIGPIPE ignored: the daemon may be gone while we report), and the
  // ones that end the run read through a signalfd.
  struct sigaction act {};
  act.sa_handler = SIG_DFL;
  sigemptyset(&act.sa_mask);
  for (int sig = 1; sig < NSIG; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &act, nullptr);
  act.sa_handler = SIG_IGN;
  ::sigaction(SIGPIPE, &act, nullptr);
  sigset_t watched;
  sigemptyset(&watched);
  for (int sig : {SIGCHLD, SIGTERM, SIGINT, SIGHUP, SIGQUIT}) sigaddset(&watched, sig);
  ::sigprocmask(SIG_SETMASK, &watched, nullptr);

  // Our own process group (a terminal's Ctrl-C or the command's `kill 0` must not reach us), a
  // subreaper (orphans of the run come to us, not to init), and told when the daemon dies.
  ::setpgid(0, 0);
  ::prctl(PR_SET_CHILD_SUBREAPER, 1);
  ::prctl(PR_SET_PDEATHSIG, SIGTERM);
  const pid_t self = ::getpid();
  if (::getppid() != s.daemon_pid) ::_exit(0);  // the daemon died before prctl: start nothing

  const int in = lift(s.stdin_fd);
  const int out = lift(s.stdout_fd);
  const int err = lift(s.stderr_fd);
  const int out_read = lift(s.stdout_read_fd);
  const int err_read = lift(s.stderr_read_fd);
  const int control = lift(s.control_fd);
  const int reports = lift(s.report_fd);
  const int sig_fd = ::signalfd(-1, &watched, SFD_CLOEXEC | SFD_NONBLOCK);
  if (in < 0 || out < 0 || err < 0 || out_read < 0 || err_read < 0 || control < 0 || reports < 0 ||
      sig_fd < 0 || ::dup2(in, 0) < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) {
    send_report(s.report_fd, report_t::setup_failed, errno, report_t::stage_fork);
    ::_exit(0);
  }
  ::fcntl(reports, F_SETFL, O_NONBLOCK);
  int keep[5] = {control, reports, sig_fd, out_read, err_read};
  for (int i = 0; i < 5; ++i)
    for (int j = i + 1; j < 5; ++j)
      if (keep[j] < keep[i]) {
        const int t = keep[i];
        keep[i] = keep[j];
        keep[j] = t;
      }
  close_all_but(keep, 5);

  process_table table;
  table.init();

  const pid_t job = ::fork();
  if (job < 0) {
    send_report(reports, report_t::setup_failed, errno, report_t::stage_fork);
    ::_exit(0);
  }
  if (job == 0) exec_command(s, reports, self);
  ::setpgid(job, job);
  ::close(0);
  ::close(1);
  ::close(2);
  send_report(reports, report_t::started, job);

  int outputs[2] = {out_read, err_read};
  ::fcntl(out_read, F_SETFL, O_NONBLOCK);
  ::fcntl(err_read, F_SETFL, O_NONBLOCK);
  bool job_alive = true;
  bool control_open = true;
  bool term_sent = false;
  bool kill_sent = false;
  long long term_at = 0;
  int leftovers = 0;
  auto terminate = [&](std::int32_t reason) {
    if (term_sent) return;
    term_sent = true;
    term_at = now_ms();
    const int n = table.signal_descendants(self, SIGTERM);
    if (reason == report_t::reason_leftovers) leftovers = n;
    send_report(reports, report_t::terminating, n, reason);
  };

  while (true) {
    // Reap whatever ended; ECHILD means the whole tree is gone (orphans come to us).
    bool children_left = true;
    while (true) {
      int status = 0;
      const pid_t p = ::waitpid(-1, &status, WNOHANG);
      if (p > 0) {
        if (p == job) {
          job_alive = false;
          send_report(reports, report_t::exited, status);
        }
        continue;
      }
      if (p < 0 && errno == EINTR) continue;
      children_left = p == 0;
      break;
    }
    if (!children_left) break;
    if (!job_alive) terminate(report_t::reason_leftovers);
    const long long now = now_ms();
    if (term_sent && !kill_sent && now >= term_at + s.kill_grace_ms) {
      kill_sent = true;
      send_report(reports, report_t::killing, table.signal_descendants(self, SIGKILL));
    } else if (kill_sent) {
      table.signal_descendants(self, SIGKILL);  // anything forked since the last round
    }

    int timeout = -1;  // nothing to time: a signal or the control pipe wakes us
    if (kill_sent) {
      timeout = 10;
    } else if (term_sent) {
      long long left = term_at + s.kill_grace_ms - now;
      timeout = static_cast<int>(left < 0 ? 0 : left > 1000 ? 1000 : left);
    }
    // The output pipes are the daemon's to read while it lives; after that, ours to discard.
    pollfd fds[4] = {{sig_fd, POLLIN, 0},
                     {control_open ? control : -1, POLLIN, 0},
                     {control_open ? -1 : outputs[0], POLLIN, 0},
                     {control_open ? -1 : outputs[1], POLLIN, 0}};
    ::poll(fds, 4, timeout);
    for (int i = 0; i < 2; ++i)
      if (fds[2 + i].revents & (POLLIN | POLLHUP | POLLERR)) {
        char sink[4096];
        ssize_t n;
        while ((n = ::read(outputs[i], sink, sizeof sink)) > 0) {
        }
        if (n == 0 || (errno != EAGAIN && errno != EINTR)) outputs[i] = -1;  // end of file
      }
    if (fds[0].revents & POLLIN) {
      signalfd_siginfo info{};
      while (::read(sig_fd, &info, sizeof info) == static_cast<ssize_t>(sizeof info))
        if (info.ssi_signo != SIGCHLD) terminate(report_t::reason_signal);
    }
    if (control_open && (fds[1].revents & (POLLIN | POLLHUP | POLLERR))) {
      char buf[16];
      const ssize_t n = ::read(control, buf, sizeof buf);
      if (n > 0) {
        for (ssize_t i = 0; i < n; ++i)
          if (buf[i] == 'T') terminate(report_t::reason_requested);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        control_open = false;
        terminate(report_t::reason_daemon_gone);
      }
    }
  }
  send_report(reports, report_t::done, leftovers);
  ::_exit(0);
}

}  // namespace baton::detail
