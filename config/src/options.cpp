// From a parsed config to the scheduler's options.
#include <algorithm>
#include <thread>

#include <nlohmann/json.hpp>

#include "baton/config/config.hpp"
#include "baton/config/duration.hpp"
#include "baton/jobs/command_job.hpp"

namespace baton::config {

unsigned daemon_job_threads() { return std::max(2u, std::thread::hardware_concurrency()); }

scheduler_options make_scheduler_options(const daemon_config& config,
                                         const contend_options& backend_defaults,
                                         std::string contender_id) {
  scheduler_options opts;
  // Command jobs are asynchronous: a pool thread only starts a run, so a few threads keep up with
  // any number of schedules (and runs that last hold none). The pool starts threads only as runs
  // start at once, so idle schedules cost none.
  opts.job_threads = static_cast<unsigned>(
      std::clamp<std::size_t>(config.schedules.size(), 1, daemon_job_threads()));
  opts.lease = config.lease.apply(backend_defaults);
  opts.contender_id = std::move(contender_id);
  opts.balance = config.balance;
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
  command.withheld_env = config.withheld_env_for(s);
  command.log_output = config.log_output_for(s);
  // A cron schedule's wall clock is the command's too, unless its env says otherwise.
  if (!s.time_zone.empty()) command.env.emplace("TZ", s.time_zone);
  command.kill_grace = config.kill_grace_for(s, backend_defaults);
  command.working_directory = s.working_directory;
  command.user = s.user;
  command.group = s.group;
  opts.job = make_command_job(command);
  opts.async_job = make_async_command_job(std::move(command));
  opts.lease = config.lease_for(s, backend_defaults);
  opts.timeout = s.timeout;
  opts.stop_grace = config.stop_grace_for(s, backend_defaults);
  opts.misfire = s.misfire;
  opts.history = s.history.value_or(config.history);
  opts.history_output = static_cast<std::size_t>(s.history_output.value_or(config.history_output));
  opts.retries = s.retries.value_or(config.retries);
  opts.retry_backoff = s.retry_backoff.value_or(config.retry_backoff);
  opts.required_tags = s.required_tags;
  opts.preferred_tags = s.preferred_tags;
  return opts;
}

std::string fingerprint(const daemon_config& config, const schedule_config& s,
                        const contend_options& backend_defaults) {
  using nlohmann::json;
  json j;
  j["name"] = s.name;
  j["records"] = {
      s.history.value_or(config.history), s.history_output.value_or(config.history_output),
      s.retries.value_or(config.retries), s.retry_backoff.value_or(config.retry_backoff).count()};

  if (const auto* every = std::get_if<every_trigger>(&s.when)) {
    j["every"] = {every->period.count(), static_cast<int>(every->mode),
                  every->initial_delay.count()};
  } else {
    const auto& cron = std::get<cron_trigger>(s.when).expression;
    j["cron"] = {cron.text(), cron.time_zone()};
  }
  j["command"] = s.command;
  j["env"] = s.env;
  // What the job gets of the daemon's environment, and how much of its output is logged.
  j["withheld_env"] = config.withheld_env_for(s);
  j["log_output"] = config.log_output_for(s);
  j["working_directory"] = s.working_directory;
  j["user"] = s.user.value_or("");
  j["group"] = s.group.value_or("");
  j["time_zone"] = s.time_zone;
  j["timeout"] = s.timeout.count();
  j["misfire"] = static_cast<int>(s.misfire);
  const auto lease = config.lease_for(s, backend_defaults);
  j["lease"] = {lease.ttl.count(),
                lease.transition.count(),
                lease.retry_period.count(),
                lease.poll_interval.count(),
                lease.drift_margin.count(),
                lease.max_backoff.count(),
                lease.max_clock_offset.count(),
                lease.lapse_jitter.count()};
  j["stop_grace"] = config.stop_grace_for(s, backend_defaults).count();
  j["kill_grace"] = config.kill_grace_for(s, backend_defaults).count();
  // Which nodes may run it (a changed `requires` moves the schedule).
  j["requires"] = s.required_tags;
  j["prefers"] = s.preferred_tags;
  // CBOR keeps every byte of a value as it is: dump() would throw on an argument or variable
  // that is not UTF-8 (a ${NAME} may hold any bytes), and replacing such bytes would make two
  // different commands look the same to a reload.
  const auto bytes = json::to_cbor(j);
  return std::string(bytes.begin(), bytes.end());
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
