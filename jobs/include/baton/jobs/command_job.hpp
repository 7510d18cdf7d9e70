#pragma once
/// A job that runs an external command: argv without a shell, under a per-run supervisor that
/// ends the command's whole process tree with the run, its output logged line by line tagged with
/// the schedule (up to a cap per run).
#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "baton/jobs/job.hpp"

namespace baton {

/// How to run a command job.
struct command_options {
  /// Program and arguments, passed verbatim (no shell). argv[0] without '/' is looked up in PATH.
  std::vector<std::string> argv;
  /// Extra environment variables on top of the daemon's environment (BATON_* always win).
  std::map<std::string, std::string> env;
  /// Variables of the daemon's environment the command does not get (the daemon passes the
  /// names its config referenced as `${NAME}`: secrets stay with the daemon). `env` and the
  /// BATON_* variables are added after this removal.
  std::set<std::string> withheld_env;
  /// Most bytes of each stream (stdout, stderr) logged per run; the rest is still read, counted
  /// and dropped, and one line at the end of the run says how much. 0: no output is logged.
  std::uint64_t log_output = 64 * 1024;
  /// Between SIGTERM and SIGKILL to every process of the run once it must end.
  std::chrono::milliseconds kill_grace{2000};
  /// The command's working directory; empty: the daemon's.
  std::string working_directory;
  /// Run as this user (name or numeric id): its uid, its primary group unless `group` is set, its
  /// supplementary groups, and HOME, USER and LOGNAME. Needs root unless it is the daemon's own.
  std::optional<std::string> user;
  /// Run with this primary group (name or numeric id). Needs root unless it is the daemon's own.
  std::optional<std::string> group;
  /// The per-run supervisor program (`baton-supervisor`, installed beside the daemon), started
  /// with posix_spawn(): a run then costs the same however large this process is. nullopt: look
  /// it up beside this process's executable (`<dir>/baton-supervisor`, then
  /// `<dir>/../libexec/baton/baton-supervisor`); empty, or not found: fork() this process into
  /// the supervisor instead (a copy of its page tables per run, which grows with its size).
  std::optional<std::string> supervisor;
};

/// The supervisor program make_command_job() uses when command_options::supervisor is unset:
/// found beside this process's executable (see there), or empty (the supervisor is forked).
const std::string& default_supervisor_program();

/// The identity a command runs as: resolved from command_options::user and ::group.
struct command_identity {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  ///< supplementary groups
  std::string user_name;      ///< empty when only `group` was given
  std::string home;           ///< the user's home directory (empty when only `group`)
};

/// Looks `user` and `group` up in the system's user database. nullopt when both are unset.
/// Throws std::invalid_argument naming the field: "user 'x': no such user", "group 'y': no such
/// group", or "user 'x': switching user needs the daemon to run as root (it runs as uid 1000)".
std::optional<command_identity> resolve_identity(const std::optional<std::string>& user,
                                                 const std::optional<std::string>& group);

/// A failed command run: not found, could not start, non-zero exit or killed by a signal.
class command_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Makes a job that runs `opts.argv` once per fire. The child gets the daemon's environment
/// without `opts.withheld_env`, `opts.env` and BATON_SCHEDULE, BATON_MUTEX, BATON_FENCING_TOKEN,
/// BATON_CONTENDER_ID, BATON_FIRE_TIME (RFC 3339 UTC); stdin is /dev/null and no other descriptor
/// than 0, 1, 2; stdout/stderr lines are logged as "[<schedule>] stdout: ..." / "[<schedule>]
/// stderr: ...", up to `opts.log_output` bytes per stream per run.
///
/// Every run starts under its own supervisor process, a child subreaper: descendants of the
/// command that called setsid(), double-forked or were started with `nohup ... &` stay below it.
/// When ctx.stop fires or ctx.deadline passes, every process of the run gets SIGTERM, then
/// SIGKILL after kill_grace; processes left behind when the command exits get the same. If the
/// process that runs the job dies (even by SIGKILL), the supervisor sees its control pipe close
/// and ends the tree the same way, so nothing of the run outlives it by more than kill_grace.
/// The job returns once every process of the run is gone. Throws command_error when the run
/// fails (not found, exec error, non-zero exit, signal); the status is the command's own. Throws
/// std::invalid_argument here for an empty argv, a negative kill_grace or an unknown user/group.
job_function make_command_job(command_options opts);

/// The same job, asynchronous: the call starts the run (its supervisor) and returns; one thread
/// of the process (epoll) watches every such run — output, reports, stop requests, timeouts —
/// and calls `done` when it has ended, with the command_error the synchronous job would throw.
/// So a thousand commands running at once need no thread each. Throws like make_command_job().
async_job_function make_async_command_job(command_options opts);

}  // namespace baton
