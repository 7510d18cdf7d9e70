#pragma once
/// A job that runs an external command: argv without a shell, its own process group, killed with
/// the daemon (PR_SET_PDEATHSIG), its output logged line by line tagged with the schedule.
#include <chrono>
#include <map>
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
  /// Between SIGTERM and SIGKILL to the process group once the job is asked to stop.
  std::chrono::milliseconds kill_grace{2000};
};

/// A failed command run: not found, could not start, non-zero exit or killed by a signal.
class command_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Makes a job that runs `opts.argv` once per fire. The child gets the daemon's environment,
/// `opts.env` and BATON_SCHEDULE, BATON_MUTEX, BATON_FENCING_TOKEN, BATON_CONTENDER_ID,
/// BATON_FIRE_TIME (RFC 3339 UTC); stdin is /dev/null; stdout/stderr lines are logged as
/// "[<schedule>] stdout: ..." / "[<schedule>] stderr: ...". When ctx.stop fires or ctx.deadline
/// passes the process group gets SIGTERM, then SIGKILL after kill_grace; processes left in the
/// group after the command exits are killed. Throws command_error when the run fails (not found,
/// exec error, non-zero exit, signal). Throws std::invalid_argument here for an empty argv or a
/// negative kill_grace.
job_function make_command_job(command_options opts);

}  // namespace baton
