#pragma once
// Runs of a job recorded by the job itself: `baton run` nodes whose command appends (fence,
// start, end, node) to one shared file, and the checks on what they recorded (one run at a time,
// fences never go down, a new node has a higher fence).
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "baton/mutex/backend.hpp"

namespace baton::test {

/// One run as the job logged it; times are the host's wall clock in ns since the epoch.
struct job_run {
  std::uint64_t fence = 0;
  long long start_ns = 0;
  long long end_ns = -1;  ///< -1: no end logged (still running, or killed without its trap)
  std::string node;
};

/// Writes DIR/record_run.sh: `record_run.sh LOG NODE SECONDS` appends "start FENCE START NODE",
/// sleeps SECONDS, and appends "end FENCE START END NODE" (also on SIGTERM).
std::filesystem::path write_run_recorder(const std::filesystem::path& dir);

/// The JSON array of a schedule's command running the recorder. It runs under `env -u
/// LD_PRELOAD -u FAKETIME`, so that a node with a faked clock (libfaketime) logs true times.
std::string run_recorder_command(const std::filesystem::path& recorder,
                                 const std::filesystem::path& log, const std::string& node,
                                 const std::string& seconds);

/// The runs in `log`, by start time.
std::vector<job_run> read_runs(const std::filesystem::path& log);

/// What the runs show: overlaps of runs by different fences (a run without a logged end counts
/// as ending at `open_end_ns`), fences that went down, and new nodes without a higher fence.
struct run_check {
  std::size_t overlaps = 0;
  std::size_t fence_regressions = 0;
  std::string details;  ///< one line per finding
};
run_check check_runs(const std::vector<job_run>& runs, long long open_end_ns);

/// The backend object of a daemon config for `config` ({"type": ..., params...}).
std::string backend_json(const backend_config& config);

/// The host's wall clock in ns since the epoch (the clock the recorder logs).
long long wall_ns();

}  // namespace baton::test
