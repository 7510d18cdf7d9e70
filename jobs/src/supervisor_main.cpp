// baton-supervisor: the per-run supervisor (supervisor.cpp) as a program of its own. The command
// job starts it with posix_spawn() (vfork semantics: no copy of the daemon's address space, so a
// run costs the same whether the daemon holds 10 schedules or 10,000) instead of forking the
// daemon. Not meant to be run by hand.
//
//   baton-supervisor DAEMON_PID KILL_GRACE_MS WORKING_DIRECTORY|- UID|- GID|- GROUPS PROGRAM
//   ARGV...
//
// (GROUPS: the supplementary groups, comma-separated; ARGV starts with the command's argv[0].)
//
// Descriptors, as the command job sets them up (supervisor_fd below): 0 stdin of the command
// (/dev/null), 1 and 2 its stdout and stderr (pipes to the daemon), 3 and 4 the daemon's read
// ends of those pipes, 5 the control pipe (read end), 6 the report pipe (write end). Its own
// environment is empty: the command's variables (BATON_SCHEDULE, ...) mark the run's processes,
// and the supervisor is not one of them.
#include <sys/types.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "supervisor.hpp"

namespace {

bool parse_number(const char* s, long long& out) {
  if (s == nullptr || *s == '\0') return false;
  char* end = nullptr;
  errno = 0;
  out = std::strtoll(s, &end, 10);
  return errno == 0 && *end == '\0';
}

}  // namespace

int main(int argc, char** argv) {
  using namespace baton::detail;
  namespace fd = supervisor_fd;
  if (argc < 10) return 127;
  long long daemon_pid = 0, kill_grace = 0, gid = 0;
  if (!parse_number(argv[1], daemon_pid) || !parse_number(argv[2], kill_grace)) return 127;
  supervisor_setup s;
  s.daemon_pid = static_cast<pid_t>(daemon_pid);
  s.kill_grace_ms = kill_grace;
  if (std::strcmp(argv[3], "-") != 0) s.working_directory = argv[3];
  static gid_t groups[65536];
  if (std::strcmp(argv[4], "-") != 0) {
    long long uid = 0;
    if (!parse_number(argv[4], uid) || !parse_number(argv[5], gid)) return 127;
    s.switch_identity = true;
    s.uid = static_cast<uid_t>(uid);
    s.gid = static_cast<gid_t>(gid);
    std::size_t n = 0;
    for (char* p = argv[6]; *p != '\0' && n < 65536;) {
      char* end = nullptr;
      groups[n++] = static_cast<gid_t>(std::strtoul(p, &end, 10));
      p = *end == ',' ? end + 1 : end;
      if (end == p && *p != '\0') return 127;
    }
    s.groups = groups;
    s.group_count = n;
  }
  long long env_count = 0;
  if (!parse_number(argv[7], env_count) || env_count < 0 || env_count > argc - 10) return 127;
  char** envp = new char*[static_cast<std::size_t>(env_count) + 1];
  for (long long i = 0; i < env_count; ++i) envp[i] = argv[8 + i];
  envp[env_count] = nullptr;
  s.envp = envp;
  s.program = argv[8 + env_count];
  s.argv = argv + 9 + env_count;
  s.stdin_fd = fd::command_stdin;
  s.stdout_fd = fd::command_stdout;
  s.stderr_fd = fd::command_stderr;
  s.stdout_read_fd = fd::stdout_read;
  s.stderr_read_fd = fd::stderr_read;
  s.control_fd = fd::control;
  s.report_fd = fd::report;
  run_supervisor(s);
}
