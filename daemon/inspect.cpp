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
#include "report.hpp"

namespace baton::daemon {

using std::chrono::milliseconds;
using std::chrono::system_clock;

namespace {

// How long `status` may take before it gives up on an unresponsive backend.
constexpr std::chrono::seconds status_deadline{30};

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
  const auto& console = config->console;
  const std::string token_source = !console.token_env.empty()
                                       ? "the token in $" + console.token_env
                                       : "the token in " + console.token_file;
  out << "http: "
      << (config->http_listen
              ? "listen " + config->http_listen->text() + " (/metrics, /healthz, /readyz)"
              : std::string("off (no http.listen)"))
      << "\n";
  out << "console: "
      << (!console.enabled
              ? std::string("off")
              : "on (the page at /, the read-only API at /api/v1; controls " +
                    (console.allow_control ? "allowed with " + token_source : std::string("off")) +
                    ")" + (config->http_listen ? "" : ", served with --http-listen"))
      << "\n";
  auto or_null = [](const std::string& v) {
    return v.empty() ? nlohmann::json(nullptr) : nlohmann::json(v);
  };
  doc["http"] = {{"listen", config->http_listen ? nlohmann::json(config->http_listen->text())
                                                : nlohmann::json(nullptr)},
                 {"console", console.enabled},
                 {"allow_control", console.allow_control},
                 {"token_env", or_null(console.token_env)},
                 {"token_file", or_null(console.token_file)}};
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
  status_report report;
  {
    watchdog guard(status_deadline, "status", "the " + config->backend.type + " backend");
    report = build_status(*config, *backend);
  }
  for (const auto& w : report.warnings) std::cerr << "baton status: warning: " << w << "\n";
  if (!report.error.empty()) {
    std::cerr << "baton status: " << report.error << "\n";
    return exit_failure;
  }
  std::cout << (cl.json ? dump_json(report.doc) : report.text);
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
