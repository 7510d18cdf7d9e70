// baton validate, status and calendar, and the helpers they share with run.
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "baton/backends/factory.hpp"
#include "baton/config/duration.hpp"
#include "baton/mutex/runtime.hpp"
#include "baton/scheduler/balance.hpp"
#include "baton/scheduler/cron.hpp"
#include "baton/scheduler/detail/schedule_plan.hpp"
#include "baton/scheduler/records.hpp"
#include "baton/scheduler/scheduler.hpp"
#include "commands.hpp"
#include "output.hpp"

namespace baton::daemon {

using std::chrono::milliseconds;
using std::chrono::system_clock;

namespace {

// How long `status` may take before it gives up on an unresponsive backend.
constexpr std::chrono::seconds status_deadline{30};

std::string join(const std::vector<std::string>& items, const char* sep = " ") {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : sep) + i;
  return out;
}

}  // namespace

std::optional<config::daemon_config> load_or_report(const command_line& cl) {
  try {
    return config::load_config(cl.config);
  } catch (const config::config_error& e) {
    for (const auto& message : e.errors()) std::cerr << message << "\n";
    std::cerr << e.count() << (e.count() == 1 ? " error" : " errors") << " in " << cl.config
              << "\n";
    return std::nullopt;
  }
}

std::string find_program(const std::string& program) {
  if (program.find('/') != std::string::npos)
    return ::access(program.c_str(), X_OK) == 0 ? program : std::string();
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  for (std::string dir; std::getline(dirs, dir, ':');) {
    std::string candidate = (dir.empty() ? "." : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return {};
}

std::shared_ptr<mutex_backend> make_configured_backend(
    const config::daemon_config& config, runtime& rt, int& status,
    const std::function<void(const std::string&)>& report, bool read_only) {
  try {
    backend_config backend = config.backend;
    backend.read_only = read_only;
    return make_backend(backend, rt);
  } catch (const std::invalid_argument& e) {
    std::cerr << config.source << ": /backend: " << scrub_secrets(config.backend, e.what()) << "\n";
    status = exit_usage;
  } catch (const std::exception& e) {
    report("cannot set up the " + config.backend.type +
           " backend: " + scrub_secrets(config.backend, e.what()));
    status = exit_failure;
  }
  return nullptr;
}

std::string scrub_secrets(const backend_config& backend, const std::string& text) {
  return scrub(text, secrets_of(find_backend(backend.type), backend));
}

std::string describe_backend(const backend_config& backend) {
  // The backend's descriptor masks: each connection string and URL is parsed by the code the
  // backend connects with (libpq's parser for PostgreSQL), whole-value secrets become ***.
  return describe(find_backend(backend.type), backend);
}

// ---------------------------------------------------------------------------------------------

namespace {

nlohmann::json time_or_null(const std::optional<system_clock::time_point>& t) {
  return t ? nlohmann::json(utc(*t)) : nlohmann::json(nullptr);
}

// The trigger of a schedule for --json.
nlohmann::json trigger_json(const trigger& when) {
  nlohmann::json j{{"description", config::describe(when)}};
  if (const auto* every = std::get_if<every_trigger>(&when)) {
    j["kind"] = "every";
    j["period_ms"] = every->period.count();
    j["mode"] = every->mode == every_mode::fixed_delay ? "fixed_delay" : "fixed_rate";
    j["initial_delay_ms"] = every->initial_delay.count();
  } else {
    const auto& cron = std::get<cron_trigger>(when).expression;
    j["kind"] = "cron";
    j["expression"] = cron.text();
    j["time_zone"] = cron.time_zone();
    j["never_fires"] = cron.never_fires();
  }
  return j;
}

}  // namespace

int validate(const command_line& cl) {
  auto config = load_or_report(cl);
  if (!config) return exit_usage;
  configure_logging(cl.log_level.value_or("warn"), cl.log_format.value_or(config->log_format));

  // load_config() checked the schedules the way `run` does, against the lease defaults of the
  // configured backend (from its descriptor and parameters), without contacting it.
  const contend_options& defaults = config->backend_defaults;

  // Text goes to `text`, printed unless --json; warnings go to stderr either way (and into the
  // JSON document's "warnings").
  std::ostringstream text;
  std::ostream& out = text;
  nlohmann::json doc{{"schema", 1},
                     {"config", config->source},
                     {"backend", backend_json(config->backend)},
                     {"warnings", nlohmann::json::array()},
                     {"schedules", nlohmann::json::array()}};
  auto warn = [&](const std::string& path, const std::string& message) {
    std::cerr << config->source << ": " << path << ": warning: " << message << "\n";
    doc["warnings"].push_back({{"path", path}, {"message", message}});
  };
  const auto now = system_clock::now();
  out << config->source << ": OK, " << config->schedules.size()
      << (config->schedules.size() == 1 ? " schedule" : " schedules") << "\n";
  out << "backend: " << describe_backend(config->backend)
      << " (not contacted; `baton status` does)\n";
  out << "log: level " << config->log_level << ", format " << config->log_format
      << " (run's stderr; --log-level and --log-format override them)\n";
  doc["log"] = {{"level", config->log_level}, {"format", config->log_format}};
  if (const auto* d = find_backend(config->backend.type); d && !d->process_local.empty())
    warn("/backend/type", d->process_local);
  // http.listen (`run --http-listen` overrides it): /metrics, /healthz, /readyz.
  out << "http: "
      << (config->http_listen
              ? "listen " + config->http_listen->text() + " (/metrics, /healthz, /readyz)"
              : std::string("off (no http.listen)"))
      << "\n";
  doc["http"] = {{"listen", config->http_listen ? nlohmann::json(config->http_listen->text())
                                                : nlohmann::json(nullptr)}};
  // node and balance: who this node is in the cluster, and how the schedules are shared.
  const auto& balance = config->balance;
  out << "node: "
      << (balance.node_id.empty()
              ? std::string("id not set (a new member at every start: set /node/id, e.g. to the "
                            "host name, so that a restart moves nothing)")
              : "id " + balance.node_id)
      << ", tags " << tags_text(balance.tags) << "\n";
  doc["node"] = {
      {"id", balance.node_id.empty() ? nlohmann::json(nullptr) : nlohmann::json(balance.node_id)},
      {"tags", balance.tags}};
  if (balance.enabled)
    out << "balance: on: each live node leads a fair share (heartbeat "
        << config::format_duration(config->balance_for(defaults).heartbeat) << ", member_timeout "
        << config::format_duration(config->member_timeout_for(defaults)) << ", settle "
        << config::format_duration(config->settle_for(defaults)) << ", handoff_rate "
        << balance.handoff_rate << "/s)\n";
  else
    out << "balance: off: first come (the first node to ask leads every schedule it may run)\n";
  doc["balance"] = {{"enabled", balance.enabled},
                    {"heartbeat_ms", config->balance_for(defaults).heartbeat.count()},
                    {"member_timeout_ms", config->member_timeout_for(defaults).count()},
                    {"settle_ms", config->settle_for(defaults).count()},
                    {"handoff_rate", balance.handoff_rate}};
  doc["notes"] = nlohmann::json::array();
  for (const auto& s : config->schedules) {
    const auto lease = config->lease_for(s, defaults);
    nlohmann::json js{{"name", s.name}, {"path", s.path}, {"trigger", trigger_json(s.when)}};
    out << "\n" << s.name << "\n";
    out << "  trigger:    " << config::describe(s.when) << "\n";
    // A backend password passed to a command as well ("${PG_PASSWORD}") is not shown either.
    out << "  command:    " << scrub_secrets(config->backend, join(s.command)) << "\n";
    js["command"] = nlohmann::json::array();
    for (const auto& arg : s.command) js["command"].push_back(scrub_secrets(config->backend, arg));
    // Names only, never values: which of the daemon's variables this schedule's jobs do not get.
    const bool inherit = s.inherit_env.value_or(config->inherit_env);
    const auto withheld = inherit ? std::set<std::string>{} : config->withheld_env_for(s);
    js["job_env"] = {{"inherit_env", inherit}, {"withheld", withheld}};
    if (inherit) {
      out << "  job env:    the daemon's whole environment (inherit_env)\n";
    } else if (!withheld.empty()) {
      out << "  job env:    the daemon's without " << join({withheld.begin(), withheld.end()})
          << " (referenced as ${NAME})\n";
    }
    const bool found = !find_program(s.command.front()).empty();
    js["program_found"] = found;
    if (!found)
      out << "  warning:    program '" << s.command.front()
          << "' not found or not executable on this host\n";
    out << "  lease:      ttl " << config::format_duration(lease.ttl) << ", transition "
        << config::format_duration(lease.transition) << ", stop_grace "
        << config::format_duration(config->stop_grace_for(s, defaults)) << ", kill_grace "
        << config::format_duration(config->kill_grace_for(s, defaults)) << ", max_clock_offset "
        << (lease.max_clock_offset.count() > 0 ? config::format_duration(lease.max_clock_offset)
                                               : std::string("none"))
        << "\n";
    js["lease"] = {{"ttl_ms", lease.ttl.count()},
                   {"max_clock_offset_ms", lease.max_clock_offset.count()},
                   {"transition_ms", lease.transition.count()},
                   {"poll_interval_ms", lease.poll_interval.count()},
                   {"stop_grace_ms", config->stop_grace_for(s, defaults).count()},
                   {"kill_grace_ms", config->kill_grace_for(s, defaults).count()}};
    out << "  timeout:    "
        << (s.timeout.count() > 0 ? config::format_duration(s.timeout) : std::string("none"))
        << ", misfire " << (s.misfire == misfire_policy::skip ? "skip" : "run_once") << "\n";
    js["timeout_ms"] = s.timeout.count() > 0 ? nlohmann::json(s.timeout.count()) : nullptr;
    {
      const auto history = s.history.value_or(config->history);
      const auto history_output = s.history_output.value_or(config->history_output);
      const auto retries = s.retries.value_or(config->retries);
      const auto backoff = s.retry_backoff.value_or(config->retry_backoff);
      out << "  history:    "
          << (history == 0 ? std::string("off")
                           : std::to_string(history) + " records, last " +
                                 std::to_string(history_output) + " bytes of stderr each")
          << "\n";
      out << "  retries:    "
          << (retries == 0 ? std::string("none")
                           : std::to_string(retries) + ", backoff " +
                                 config::format_duration(backoff) + " doubling")
          << "\n";
      js["history"] = history;
      js["history_output"] = history_output;
      js["retries"] = retries;
      js["retry_backoff_ms"] = backoff.count();
    }
    js["misfire"] = s.misfire == misfire_policy::skip ? "skip" : "run_once";
    // Tags: a schedule that requires tags this node lacks never runs here.
    const bool runs_here = has_tags(balance.tags, s.required_tags);
    const bool preferred_here = has_tags(balance.tags, s.preferred_tags);
    js["requires"] = s.required_tags;
    js["prefers"] = s.preferred_tags;
    js["runs_here"] = runs_here;
    js["preferred_here"] = preferred_here;
    if (!s.required_tags.empty() || !s.preferred_tags.empty()) {
      out << "  tags:       ";
      if (!s.required_tags.empty())
        out << "requires " << tags_text(s.required_tags)
            << (runs_here ? " (this node has them)" : " (this node lacks them: never runs here)");
      if (!s.required_tags.empty() && !s.preferred_tags.empty()) out << "; ";
      if (!s.preferred_tags.empty())
        out << "prefers " << tags_text(s.preferred_tags)
            << (preferred_here ? " (this node has them)" : " (this node lacks them)");
      out << "\n";
    }
    const std::string node_tags = balance.tags.empty()
                                      ? std::string("this node has no tags")
                                      : "this node's tags are " + tags_text(balance.tags);
    if (!runs_here)
      warn(s.path + "/requires", "schedule '" + s.name + "' requires tags " +
                                     tags_text(s.required_tags) + "; " + node_tags +
                                     ": it never runs here; some other node must have them");
    if (!preferred_here) {
      const std::string note = "schedule '" + s.name + "' prefers tags " +
                               tags_text(s.preferred_tags) + "; " + node_tags +
                               ": it runs here only while no live node with them has room";
      std::cerr << config->source << ": " << s.path << "/prefers: note: " << note << "\n";
      doc["notes"].push_back({{"path", s.path + "/prefers"}, {"message", note}});
    }
    js["next_fires"] = nlohmann::json::array();
    if (const auto* every = std::get_if<every_trigger>(&s.when)) {
      out << "  next fires: (if a node took the schedule over now, with no fire recorded)\n";
      auto t = std::chrono::ceil<std::chrono::seconds>(now) + every->initial_delay;
      for (int i = 0; i < 3; ++i, t += every->period) {
        out << "    " << utc(t) << "\n";
        js["next_fires"].push_back(utc(t));
      }
    } else {
      const auto& cron = std::get<cron_trigger>(s.when).expression;
      if (cron.never_fires())
        warn(s.path + "/cron",
             "'" + cron.text() + "' can never fire (no allowed month has any of its days)");
      const auto times = cron.next_n(now, 3);
      out << "  next fires:" << (times.empty() ? " none" : "")
          << (cron.never_fires() ? " (never: no allowed month has any of its days)" : "") << "\n";
      for (const auto& t : times) {
        out << "    " << utc(t);
        if (cron.time_zone() != "UTC") out << "  " << local(t, cron.time_zone());
        out << "\n";
        js["next_fires"].push_back(utc(t));
      }
    }
    doc["schedules"].push_back(std::move(js));
  }
  std::cout << (cl.json ? dump_json(doc) : text.str());
  return exit_ok;
}

// ---------------------------------------------------------------------------------------------

namespace {

// Outcomes that count as failures in a row (status "consecutive failures"); skipped fires and
// runs stopped because their leader lost the lease neither count nor end a streak.
bool is_failure(run_outcome o) {
  return o == run_outcome::failed || o == run_outcome::killed || o == run_outcome::timed_out;
}

// What status shows of one schedule's records.
struct records_view {
  std::optional<std::vector<std::string>> waiting;  // nullopt: not tracked by this backend
  std::string waiting_error;                        // set when reading them failed
  schedule_controls controls;
  std::optional<run_record> last_run;  // the newest record of a run that started
  std::optional<run_record> last_record;
  std::size_t consecutive_failures = 0;
  bool failures_capped = false;  // the whole history read is failures
  std::string error;             // set when the history or controls could not be read
};

// `limit`: the records the schedule keeps (its `history`): reading more finds nothing more, and
// status reads every schedule's.
records_view read_records(mutex_backend& backend, const std::string& name, std::size_t limit,
                          bool nothing_stored) {
  records_view v;
  if (nothing_stored) {
    v.waiting = std::vector<std::string>{};
    return v;
  }
  try {
    v.waiting = backend.read_waiters(name);
  } catch (const std::exception& e) {
    v.waiting_error = e.what();
  }
  try {
    v.controls = read_schedule_controls(backend, name);
    const auto history = read_run_history(backend, name, std::max<std::size_t>(limit, 1));
    if (!history.empty()) v.last_record = history.front();
    bool streak = true;
    for (const auto& r : history) {
      if (r.started && !v.last_run) v.last_run = r;
      if (!streak) continue;
      if (r.outcome == run_outcome::succeeded)
        streak = false;
      else if (is_failure(r.outcome))
        ++v.consecutive_failures;
    }
    v.failures_capped = streak && history.size() >= std::max<std::size_t>(limit, 1);
  } catch (const store_missing&) {
  } catch (const std::exception& e) {
    v.error = e.what();
  }
  return v;
}

// The next planned fire by the config's trigger and the recorded last fire, as a leader taking
// the schedule over now would plan it (nullopt: none, e.g. a cron expression that never fires).
std::optional<system_clock::time_point> next_fire(const config::schedule_config& s,
                                                  const std::optional<detail::recorded_fire>& r,
                                                  system_clock::time_point now) {
  detail::schedule_plan plan(s.when, s.misfire);
  const auto at = std::chrono::time_point_cast<milliseconds>(now);
  plan.start(r, at);
  return plan.next_fire();
}

std::string run_summary(const run_record& r, system_clock::time_point now) {
  std::string out(to_string(r.outcome));
  if (r.exit_status) out += " (exit status " + std::to_string(*r.exit_status) + ")";
  if (r.signal) out += " (" + signal_text(*r.signal) + ")";
  const auto at = r.ended ? *r.ended : r.started.value_or(r.planned);
  out += ", " + relative(at, now) + " (" + utc(at) + ")";
  out += ", " + std::string(to_string(r.trigger));
  if (r.attempt > 1) out += " attempt " + std::to_string(r.attempt);
  out += ", on " + r.node + " (fence " + std::to_string(r.fence) + ")";
  return out;
}

// The nodes' membership records (balance): a table in the text, a list in the JSON. With no
// registry yet (no node has run with this version, or the store is missing) the list is empty.
void show_nodes(std::ostream& out, nlohmann::json& doc, const config::daemon_config& config,
                mutex_backend& backend) {
  const auto timeout = config.member_timeout_for(config.backend_defaults);
  std::vector<balance_member> members;
  doc["nodes"] = nlohmann::json::array();
  try {
    members = read_members(backend, timeout);
  } catch (const store_missing&) {
  } catch (const std::exception& e) {
    const auto why = scrub_secrets(config.backend, e.what());
    out << "\nnodes: cannot read the membership records (" << why << ")\n";
    std::cerr << "baton status: warning: cannot read the nodes' membership records: " << why
              << "\n";
    doc["nodes"] = nullptr;
    doc["nodes_error"] = why;
    return;
  }
  const auto now = system_clock::now();
  const auto alive = static_cast<std::size_t>(
      std::count_if(members.begin(), members.end(), [](const auto& m) { return m.alive; }));
  out << "\nnodes: " << members.size() << " known, " << alive << " alive (a record younger than "
      << config::format_duration(timeout) << ", by this host's clock)\n";
  if (members.empty()) out << "  none yet (no node has written a membership record)\n";
  std::vector<std::vector<std::string>> rows{
      {"NODE", "ALIVE", "LEADS", "ASSIGNED", "STATE", "TAGS", "WRITTEN"}};
  std::set<std::string> digests;  // the schedule sets of the live balanced nodes
  for (const auto& m : members) {
    std::string state = m.leaving        ? "left"
                        : m.drained      ? "drained"
                        : m.drain        ? "draining"
                        : !m.balance     ? "first-come"
                        : m.view.empty() ? "starting"
                                         : "active";
    if (m.alive && m.balance && !m.schedules.empty()) digests.insert(m.schedules);
    const std::string written = m.written_at ? relative(*m.written_at, now) : "unreadable";
    rows.push_back({m.node_id, m.alive ? "yes" : "no", std::to_string(m.leads),
                    m.balance ? std::to_string(m.assigned) : "-", state,
                    m.tags.empty() ? "-" : join(m.tags, ","), written});
    doc["nodes"].push_back(
        {{"id", m.node_id},
         {"contender_id", m.contender_id},
         {"alive", m.alive},
         {"state", state},
         {"tags", m.tags},
         {"balance", m.balance},
         {"leads", m.leads},
         {"assigned", m.assigned},
         {"schedule_count", m.schedule_count},
         {"drain", m.drain},
         {"drained", m.drained},
         {"leaving", m.leaving},
         {"view", m.view},
         {"schedules_digest", m.schedules},
         {"written_at", time_or_null(m.written_at)},
         {"written_age_ms",
          m.written_at ? nlohmann::json(
                             std::chrono::duration_cast<milliseconds>(now - *m.written_at).count())
                       : nlohmann::json(nullptr)}});
  }
  if (!members.empty()) {
    std::vector<std::size_t> width(rows.front().size(), 0);
    for (const auto& r : rows)
      for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], r[i].size());
    for (const auto& r : rows) {
      std::string line = " ";
      for (std::size_t i = 0; i < r.size(); ++i) {
        line += " " + r[i];
        if (i + 1 < r.size()) line += std::string(width[i] - r[i].size() + 1, ' ');
      }
      out << line << "\n";
    }
  }
  doc["mixed_configs"] = digests.size() > 1;
  if (digests.size() > 1)
    out << "  warning: the live nodes run different schedule sets: every node contends first "
           "come until their configs agree\n";
}

}  // namespace

int status(const command_line& cl) {
  auto config = load_or_report(cl);
  if (!config) return exit_usage;
  configure_logging(cl.log_level.value_or("warn"), cl.log_format.value_or(config->log_format));
  runtime rt;
  int failed = exit_ok;
  // Read-only: looking creates and changes nothing (no database file, table, key or node).
  auto backend = make_configured_backend(
      *config, rt, failed,
      [](const std::string& why) { std::cerr << "baton status: " << why << "\n"; }, true);
  if (!backend) return failed;
  std::ostringstream text;
  std::ostream& out = text;
  nlohmann::json doc{{"schema", 1},
                     {"config", config->source},
                     {"backend", backend_json(config->backend)},
                     {"store_missing", nullptr},
                     {"schedules", nlohmann::json::array()}};
  out << "backend: " << describe_backend(config->backend)
      << " (lease times are the backend's clock; runs, the nodes' wall clocks)\n";
  {
    watchdog guard(status_deadline, "status", "the " + config->backend.type + " backend");
    show_nodes(out, doc, *config, *backend);
    bool nothing_stored = false;
    for (const auto& s : config->schedules) {
      mutex_owner owner;
      std::string state;
      try {
        if (!nothing_stored) {
          owner = backend->read_owner(s.name);
          state = backend->read_state(s.name);
        }
      } catch (const store_missing& e) {
        // Not an error: no node has run on this store yet, and looking did not create it.
        out << e.what() << "; every schedule is unowned\n";
        doc["store_missing"] = e.what();
        nothing_stored = true;
      } catch (const std::exception& e) {
        std::cerr << "baton status: cannot read schedule '" << s.name << "' from the "
                  << config->backend.type
                  << " backend: " << scrub_secrets(config->backend, e.what()) << "\n";
        return exit_failure;
      }
      const auto records =
          read_records(*backend, s.name, s.history.value_or(config->history), nothing_stored);
      const auto now = system_clock::now();
      nlohmann::json js{{"name", s.name}, {"trigger", config::describe(s.when)}};

      out << "\n" << s.name << ": " << config::describe(s.when) << "\n";
      if (!owner.empty()) {
        out << "  owner:      " << owner.owner_id << " (fence " << owner.fence << ")\n";
        out << "  acquired:   " << utc(owner.acquired_at) << "\n";
        out << "  ttl_at:     " << utc(owner.ttl_at) << "  (the owner renews from here)\n";
        out << "  transition: " << utc(owner.transition_at)
            << "  (others may take over after this)\n";
        js["owner"] = {{"id", owner.owner_id},
                       {"fence", owner.fence},
                       {"acquired_at", utc(owner.acquired_at)},
                       {"ttl_at", utc(owner.ttl_at)},
                       {"transition_at", utc(owner.transition_at)}};
      } else if (owner.fence > 0) {
        out << "  owner:      none (last fence " << owner.fence << ")\n";
        js["owner"] = nullptr;
      } else {
        out << "  owner:      none (never held)\n";
        js["owner"] = nullptr;
      }
      js["fence"] = owner.fence;

      if (!records.waiting_error.empty()) {
        out << "  waiting:    cannot read ("
            << scrub_secrets(config->backend, records.waiting_error) << ")\n";
        js["waiting"] = nullptr;
        js["waiting_tracked"] = false;
      } else if (!records.waiting) {
        out << "  waiting:    not tracked by this backend\n";
        js["waiting"] = nullptr;
        js["waiting_tracked"] = false;
      } else {
        out << "  waiting:    "
            << (records.waiting->empty() ? std::string("none") : join(*records.waiting, ", "))
            << "\n";
        js["waiting"] = *records.waiting;
        js["waiting_tracked"] = true;
      }

      const auto& c = records.controls;
      if (c.paused) {
        out << "  paused:     yes, since " << (c.changed_at ? utc(*c.changed_at) : "?") << " by "
            << c.changed_by << (c.reason.empty() ? "" : ": " + c.reason) << "\n";
      } else {
        out << "  paused:     no\n";
      }
      js["paused"] = c.paused;
      js["controls"] = nlohmann::json::parse(to_json(c));
      js["controls"]["version"] = c.version;

      // v1 (last fire) or v2 (also the manual runs taken).
      const auto parsed = baton::detail::parse_state(state);
      const auto recorded = parsed ? parsed->fire : std::nullopt;
      js["manual_runs_taken"] = parsed ? nlohmann::json(parsed->manual_runs) : nullptr;
      if (recorded) {
        out << "  last fire:  " << utc(recorded->last_fire) << " (fence " << recorded->fence << ")";
        if (recorded->last_end) out << ", run ended " << utc(*recorded->last_end);
        out << "\n";
        js["last_fire"] = {{"planned", utc(recorded->last_fire)},
                           {"fence", recorded->fence},
                           {"ended", time_or_null(recorded->last_end)}};
      } else if (parsed) {
        out << "  last fire:  none recorded\n";
        js["last_fire"] = nullptr;
      } else {
        out << "  state:      " << state << " (unrecognized)\n";
        js["last_fire"] = nullptr;
      }

      const auto next = next_fire(s, recorded, now);
      out << "  next fire:  ";
      if (!next)
        out << "none";
      else if (*next <= now)
        out << "due now (" << utc(*next) << ")";
      else
        out << utc(*next) << " (" << relative(*next, now) << ")";
      if (c.paused) out << ", skipped while paused";
      if (owner.empty()) out << ", when a node leads it";
      out << "\n";
      js["next_fire"] = time_or_null(next);

      if (!records.error.empty()) {
        const auto why = scrub_secrets(config->backend, records.error);
        out << "  last run:   unknown (history not readable: " << why << ")\n";
        std::cerr << "baton status: warning: cannot read the history or controls of '" << s.name
                  << "': " << why << "\n";
        js["records_error"] = why;
      } else if (records.last_run) {
        out << "  last run:   " << run_summary(*records.last_run, now) << "\n";
        if (records.last_record && records.last_record->seq != records.last_run->seq)
          out << "  newest:     " << to_string(records.last_record->outcome) << " (planned "
              << utc(records.last_record->planned) << ")\n";
      } else {
        out << "  last run:   none recorded\n";
      }
      js["last_run"] = records.last_run ? nlohmann::json::parse(to_json(*records.last_run))
                                        : nlohmann::json(nullptr);
      js["last_record"] = records.last_record ? nlohmann::json::parse(to_json(*records.last_record))
                                              : nlohmann::json(nullptr);
      out << "  failures:   " << records.consecutive_failures
          << (records.failures_capped ? "+" : "") << " in a row\n";
      js["consecutive_failures"] = records.consecutive_failures;
      doc["schedules"].push_back(std::move(js));
    }
  }
  std::cout << (cl.json ? dump_json(doc) : text.str());
  return exit_ok;
}

// ---------------------------------------------------------------------------------------------

int calendar(const command_line& cl) {
  try {
    (void)cron_expression::parse("* * * * *", cl.time_zone);
  } catch (const cron_error& e) {
    std::cerr << "baton calendar: --time-zone: " << e.what() << "\n";
    return exit_usage;
  }
  std::optional<cron_expression> expr;
  try {
    expr = cron_expression::parse(cl.expression, cl.time_zone);
  } catch (const cron_error& e) {
    std::cerr << "baton calendar: EXPR '" << cl.expression << "': " << e.what() << "\n";
    return exit_usage;
  }
  auto from = system_clock::now();
  if (cl.from) {
    auto parsed = parse_rfc3339(*cl.from);
    if (!parsed) {
      std::cerr << "baton calendar: --from: '" << *cl.from
                << "' is not an RFC 3339 time (e.g. 2026-11-22T03:00:00Z or "
                   "2026-11-22T04:00:00+01:00)\n";
      return exit_usage;
    }
    from = *parsed;
  }
  nlohmann::json doc{{"schema", 1},
                     {"expression", cl.expression},
                     {"time_zone", cl.time_zone},
                     {"from", utc(from)},
                     {"never_fires", expr->never_fires()},
                     {"warnings", nlohmann::json::array()},
                     {"fire_times", nlohmann::json::array()}};
  auto warn = [&](const std::string& message) {
    std::cerr << "baton calendar: warning: " << message << "\n";
    doc["warnings"].push_back(message);
  };
  if (expr->never_fires())
    warn("'" + cl.expression + "' can never fire (no allowed month has any of its days)");
  const auto times = expr->next_n(from, cl.count);
  std::ostringstream text;
  for (const auto& t : times) {
    text << utc(t);
    nlohmann::json entry{{"utc", utc(t)}};
    if (cl.time_zone != "UTC") {
      text << "  " << local(t, cl.time_zone);
      entry["local"] = local(t, cl.time_zone);
    }
    text << "\n";
    doc["fire_times"].push_back(std::move(entry));
  }
  if (times.size() < cl.count && !expr->never_fires()) {
    // Not a warning: the expression fires, only not as often as asked within the search bound.
    std::cerr << "baton calendar: " << (times.empty() ? "no" : "no more")
              << " fire times within 400 years\n";
  }
  std::cout << (cl.json ? dump_json(doc) : text.str());
  return exit_ok;
}

}  // namespace baton::daemon
