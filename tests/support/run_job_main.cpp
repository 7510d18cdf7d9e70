// baton_run_job KILL_GRACE_MS COMMAND...: runs one command job (make_command_job) to its end, as
// the daemon would, so that a test can kill the process that runs it.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "baton/jobs/command_job.hpp"

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: baton_run_job KILL_GRACE_MS COMMAND...\n");
    return 2;
  }
  baton::command_options opts;
  opts.kill_grace = std::chrono::milliseconds{std::atoll(argv[1])};
  opts.argv.assign(argv + 2, argv + argc);
  baton::job_context ctx;
  ctx.schedule = "run-job";
  ctx.contender_id = "helper";
  try {
    baton::make_command_job(opts)(ctx);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
