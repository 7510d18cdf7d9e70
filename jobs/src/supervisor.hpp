#pragma once
// The per-run supervisor ("shim"): the process that the daemon forks for every command run. It
// is a child subreaper, so every descendant of the command, including those that called setsid()
// or double-forked, stays below it; it ends them all when the run must end and reaps them before
// it exits. It runs in a forked child of a multi-threaded process and so makes only
// async-signal-safe calls: everything it needs is prepared before fork().
#include <sys/types.h>

#include <cstddef>
#include <cstdint>

namespace baton::detail {

/// What the supervisor and the command (before exec) tell the daemon, one record per write
/// (smaller than PIPE_BUF, so records never interleave).
struct supervisor_report {
  enum kind_t : std::int32_t {
    started = 1,       ///< value: the command's pid
    setup_failed = 2,  ///< value: errno, stage: which step (a stage_t)
    exited = 3,        ///< value: the command's wait status
    terminating = 4,   ///< SIGTERM sent; value: processes signalled, stage: a reason_t
    killing = 5,       ///< SIGKILL sent after kill_grace; value: processes signalled
    done = 6,          ///< every process of the run is gone and reaped; value: leftovers ended
  };
  enum stage_t : std::int32_t {
    stage_fork = 1,
    stage_chdir,
    stage_groups,
    stage_gid,
    stage_uid,
    stage_exec,
  };
  enum reason_t : std::int32_t {
    reason_requested = 1,  ///< the daemon asked ('T' on the control pipe)
    reason_daemon_gone,    ///< the control pipe closed or the parent-death signal came
    reason_signal,         ///< the supervisor itself got SIGTERM/SIGINT/SIGHUP/SIGQUIT
    reason_leftovers,      ///< the command exited and left processes behind
  };
  std::int32_t kind = 0;
  std::int32_t value = 0;
  std::int32_t stage = 0;
  std::int32_t reserved = 0;
};

/// The human text of a supervisor_report::stage_t ("cannot change to the working directory").
const char* describe_stage(std::int32_t stage) noexcept;

/// Everything the supervisor needs, prepared by the daemon before fork().
struct supervisor_setup {
  const char* program = nullptr;  ///< resolved path of argv[0]
  char* const* argv = nullptr;
  char* const* envp = nullptr;
  int stdin_fd = -1;   ///< becomes 0 of the command (/dev/null)
  int stdout_fd = -1;  ///< becomes 1 (a pipe to the daemon)
  int stderr_fd = -1;  ///< becomes 2 (a pipe to the daemon)
  /// The daemon's read ends of the command's stdout and stderr pipes. The supervisor holds them
  /// so that the pipes never break: a command that writes while it shuts down after the daemon
  /// died must not die of SIGPIPE before its own SIGTERM handler ran. Once the daemon is gone
  /// the supervisor reads and discards what arrives, so the command never blocks on a full pipe.
  int stdout_read_fd = -1;
  int stderr_read_fd = -1;
  int control_fd = -1;  ///< read end, daemon -> supervisor: 'T' ends the run; EOF: daemon gone
  int report_fd = -1;   ///< write end, supervisor -> daemon: supervisor_report records
  pid_t daemon_pid = 0;
  long long kill_grace_ms = 0;              ///< between SIGTERM and SIGKILL
  const char* working_directory = nullptr;  ///< nullptr: the daemon's
  bool switch_identity = false;             ///< set groups, gid and uid below before exec
  uid_t uid = 0;
  gid_t gid = 0;
  const gid_t* groups = nullptr;
  std::size_t group_count = 0;
};

/// Where the supervisor started as a program of its own (baton-supervisor, supervisor_main.cpp)
/// finds the descriptors the command job hands it.
namespace supervisor_fd {
inline constexpr int command_stdin = 0;   ///< /dev/null
inline constexpr int command_stdout = 1;  ///< write end of the stdout pipe
inline constexpr int command_stderr = 2;  ///< write end of the stderr pipe
inline constexpr int stdout_read = 3;     ///< the daemon's read end of the stdout pipe
inline constexpr int stderr_read = 4;     ///< the daemon's read end of the stderr pipe
inline constexpr int control = 5;         ///< read end of the control pipe
inline constexpr int report = 6;          ///< write end of the report pipe
inline constexpr int count = 7;
}  // namespace supervisor_fd

/// The body of the supervisor (forked, or baton-supervisor's main); never returns.
[[noreturn]] void run_supervisor(const supervisor_setup& setup) noexcept;

}  // namespace baton::detail
