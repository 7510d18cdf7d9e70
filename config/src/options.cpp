// From a parsed config to the scheduler's options.
#include <algorithm>

#include "baton/config/config.hpp"
#include "baton/config/duration.hpp"
#include "baton/jobs/command_job.hpp"

namespace baton::config {

scheduler_options make_scheduler_options(const daemon_config& config,
                                         const contend_options& backend_defaults,
                                         std::string contender_id) {
  scheduler_options opts;
  // A schedule runs one job at a time, so one thread per schedule never starves a schedule. The
  // pool starts threads only as jobs run at once, so idle schedules cost none.
  opts.job_threads =
      static_cast<unsigned>(std::clamp<std::size_t>(config.schedules.size(), 1, 256));
  opts.lease = config.lease.apply(backend_defaults);
  opts.contender_id = std::move(contender_id);
  return opts;
}

schedule_options make_schedule_options(const daemon_config& config, const schedule_config& s,
                                       const contend_options& backend_defaults) {
  schedule_options opts;
  opts.name = s.name;
  opts.when = s.when;
  command_options command;
  command.argv = s.command;
  command.env = s.env;
  command.kill_grace = config.kill_grace_for(s, backend_defaults);
  opts.job = make_command_job(std::move(command));
  opts.lease = config.lease_for(s, backend_defaults);
  opts.timeout = s.timeout;
  opts.stop_grace = config.stop_grace_for(s, backend_defaults);
  opts.misfire = s.misfire;
  return opts;
}

std::string describe(const trigger& when) {
  if (const auto* every = std::get_if<every_trigger>(&when)) {
    std::string out = "every " + format_duration(every->period) +
                      (every->mode == every_mode::fixed_delay ? " (fixed_delay)" : " (fixed_rate)");
    if (every->initial_delay.count() > 0)
      out += ", initial delay " + format_duration(every->initial_delay);
    return out;
  }
  const auto& cron = std::get<cron_trigger>(when).expression;
  return "cron \"" + cron.text() + "\" in " + cron.time_zone();
}

}  // namespace baton::config
