// baton history, pause, resume and trigger: one schedule's records in the backend.
#include <iostream>
#include <sstream>

#include "baton/scheduler/records.hpp"
#include "commands.hpp"
#include "output.hpp"

namespace baton::daemon {

using std::chrono::system_clock;

namespace {

// How long a command may wait for an unresponsive backend.
constexpr std::chrono::seconds backend_deadline{30};

// The config's schedule `cl.schedule`; null (after "FILE: no schedule 'x' (known: a, b)" on
// stderr) when the config has none of that name.
const config::schedule_config* schedule_named(const config::daemon_config& config,
                                              const command_line& cl) {
  for (const auto& s : config.schedules)
    if (s.name == cl.schedule) return &s;
  std::string known;
  for (const auto& s : config.schedules) known += (known.empty() ? "" : ", ") + s.name;
  std::cerr << "baton " << cl.command << ": NAME: no schedule '" << cl.schedule << "' in "
            << config.source << " (its schedules: " << known << ")\n";
  return nullptr;
}

// "failed (exit status 3)", "killed (SIGKILL)", "succeeded".
std::string outcome_text(const run_record& r) {
  std::string out(to_string(r.outcome));
  if (r.exit_status && r.outcome != run_outcome::succeeded)
    out += " (exit status " + std::to_string(*r.exit_status) + ")";
  else if (r.signal)
    out += " (" + signal_text(*r.signal) + ")";
  return out;
}

std::string pad(std::string s, std::size_t width) {
  if (s.size() < width) s.resize(width, ' ');
  return s + "  ";
}

// The record's lines after its first: the error and the stderr tail, indented.
void print_details(std::ostream& out, const run_record& r) {
  const std::string indent = "      ";
  if (!r.error.empty()) out << indent << "error: " << r.error << "\n";
  if (r.output.empty()) return;
  out << indent << "stderr" << (r.output_truncated ? " (last bytes)" : "") << ":\n";
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) out << indent << "  " << line << "\n";
}

// The common start of the schedule commands: the config, a NAME it has, logging, the backend
// (read-only for `history`). nullptr with `failed` set to the exit status when one is missing.
std::shared_ptr<mutex_backend> open_backend(const command_line& cl, runtime& rt, bool read_only,
                                            std::optional<config::daemon_config>& config,
                                            int& failed) {
  failed = exit_usage;
  config = load_or_report(cl);
  if (!config || !schedule_named(*config, cl)) return nullptr;
  configure_logging(cl.log_level.value_or("warn"), cl.log_format.value_or(config->log_format));
  failed = exit_ok;
  const std::string& command = cl.command;
  return make_configured_backend(
      *config, rt, failed,
      [&](const std::string& why) { std::cerr << "baton " << command << ": " << why << "\n"; },
      read_only);
}

}  // namespace

int history(const command_line& cl) {
  runtime rt;
  std::optional<config::daemon_config> config;
  int failed = exit_ok;
  // Read-only, as status: looking creates and changes nothing.
  auto backend = open_backend(cl, rt, true, config, failed);
  if (!backend) return failed;
  std::vector<run_record> records;
  {
    watchdog guard(backend_deadline, "history", "the " + config->backend.type + " backend");
    try {
      records = read_run_history(*backend, cl.schedule, cl.limit);
    } catch (const store_missing&) {
      // Nothing has run on this store yet: no history.
    } catch (const std::exception& e) {
      std::cerr << "baton history: cannot read the history of '" << cl.schedule << "' from the "
                << config->backend.type << " backend: " << scrub_secrets(config->backend, e.what())
                << "\n";
      return exit_failure;
    }
  }
  std::ostream& out = std::cout;
  if (cl.json) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& r : records) list.push_back(nlohmann::json::parse(to_json(r)));
    out << dump_json({{"schema", 1},
                      {"schedule", cl.schedule},
                      {"limit", cl.limit},
                      {"records", std::move(list)}});
    return exit_ok;
  }
  if (records.empty()) {
    out << "no runs recorded for '" << cl.schedule << "'\n";
    return exit_ok;
  }
  out << pad("SEQ", 5) << pad("PLANNED (UTC)", 24) << pad("TRIGGER", 8) << pad("TRY", 3)
      << pad("OUTCOME", 26) << pad("DURATION", 8) << pad("FENCE", 5) << "NODE\n";
  for (const auto& r : records) {
    out << pad(std::to_string(r.seq), 5) << pad(utc(r.planned), 24)
        << pad(std::string(to_string(r.trigger)), 8) << pad(std::to_string(r.attempt), 3)
        << pad(outcome_text(r), 26) << pad(r.started ? format_elapsed(r.duration) : "-", 8)
        << pad(std::to_string(r.fence), 5) << r.node << "\n";
    print_details(out, r);
  }
  return exit_ok;
}

int control(const command_line& cl) {
  runtime rt;
  std::optional<config::daemon_config> config;
  int failed = exit_ok;
  auto backend = open_backend(cl, rt, false, config, failed);
  if (!backend) return failed;
  const std::string& command = cl.command;
  const std::string by = caller_identity();
  mutex_owner owner;
  schedule_controls before;
  schedule_controls after;
  {
    watchdog guard(backend_deadline, command, "the " + config->backend.type + " backend");
    try {
      owner = backend->read_owner(cl.schedule);
      before = read_schedule_controls(*backend, cl.schedule);
      if (command == "pause")
        after = pause_schedule(*backend, cl.schedule, cl.reason, by);
      else if (command == "resume")
        after = resume_schedule(*backend, cl.schedule, by);
      else
        after = trigger_schedule(*backend, cl.schedule, by);
    } catch (const std::exception& e) {
      std::cerr << "baton " << command << ": cannot change '" << cl.schedule << "' on the "
                << config->backend.type << " backend: " << scrub_secrets(config->backend, e.what())
                << "\n";
      return exit_failure;
    }
  }
  if (owner.empty())
    std::cerr << "baton " << command << ": warning: no node leads '" << cl.schedule
              << "' now; it applies when one does\n";
  std::ostream& out = std::cout;
  const std::string when = after.changed_at ? utc(*after.changed_at) : std::string("?");
  if (command == "pause") {
    out << "'" << cl.schedule << "' " << (before.paused ? "was already paused; now " : "")
        << "paused by " << after.changed_by << " at " << when
        << (after.reason.empty() ? "" : " (reason: " + after.reason + ")")
        << ": it keeps its leader but does not fire until `baton resume " << cl.schedule << "`\n";
  } else if (command == "resume") {
    out << "'" << cl.schedule << "' " << (before.paused ? "resumed" : "was not paused; resumed")
        << " by " << after.changed_by << " at " << when
        << ": it fires again (fires missed while paused follow its misfire policy)\n";
  } else {
    out << "'" << cl.schedule << "': manual run requested (request " << after.trigger_requests
        << ", by " << by << "); "
        << (owner.empty() ? "whoever leads it next runs it"
                          : "its leader " + owner.owner_id + " runs it at its next wake-up")
        << (after.paused ? " (note: the schedule is paused)" : "") << "\n";
  }
  return exit_ok;
}

}  // namespace baton::daemon
