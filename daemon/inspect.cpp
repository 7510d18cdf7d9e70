// baton validate, status and calendar, and the helpers they share with run.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "baton/backends/factory.hpp"
#include "baton/config/duration.hpp"
#include "baton/mutex/runtime.hpp"
#include "baton/scheduler/cron.hpp"
#include "baton/scheduler/detail/schedule_plan.hpp"
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

// Exits with exit_failure if not cancelled within `timeout` (a backend call that hangs).
class watchdog {
 public:
  watchdog(std::chrono::seconds timeout, std::string what)
      : thread_([this, timeout, what = std::move(what)] {
          std::unique_lock lock(mutex_);
          if (cv_.wait_for(lock, timeout, [this] { return done_; })) return;
          std::cerr << "baton status: " << what << " did not answer within " << timeout.count()
                    << " s\n";
          std::_Exit(exit_failure);
        }) {}
  ~watchdog() {
    {
      std::lock_guard lock(mutex_);
      done_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

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

int validate(const command_line& cl) {
  auto config = load_or_report(cl);
  if (!config) return exit_usage;
  configure_logging(cl.log_level.value_or("warn"));

  // load_config() checked the schedules the way `run` does, against the lease defaults of the
  // configured backend (from its descriptor and parameters), without contacting it.
  const contend_options& defaults = config->backend_defaults;

  std::ostream& out = std::cout;
  const auto now = system_clock::now();
  out << config->source << ": OK, " << config->schedules.size()
      << (config->schedules.size() == 1 ? " schedule" : " schedules") << "\n";
  out << "backend: " << describe_backend(config->backend)
      << " (not contacted; `baton status` does)\n";
  if (const auto* d = find_backend(config->backend.type); d && !d->process_local.empty())
    std::cerr << config->source << ": /backend/type: warning: " << d->process_local << "\n";
  for (const auto& s : config->schedules) {
    const auto lease = config->lease_for(s, defaults);
    out << "\n" << s.name << "\n";
    out << "  trigger:    " << config::describe(s.when) << "\n";
    // A backend password passed to a command as well ("${PG_PASSWORD}") is not shown either.
    out << "  command:    " << scrub_secrets(config->backend, join(s.command)) << "\n";
    // Names only, never values: which of the daemon's variables this schedule's jobs do not get.
    if (s.inherit_env.value_or(config->inherit_env)) {
      out << "  job env:    the daemon's whole environment (inherit_env)\n";
    } else if (const auto withheld = config->withheld_env_for(s); !withheld.empty()) {
      std::string names;
      for (const auto& n : withheld) names += (names.empty() ? "" : " ") + n;
      out << "  job env:    the daemon's without " << names << " (referenced as ${NAME})\n";
    }
    if (find_program(s.command.front()).empty())
      out << "  warning:    program '" << s.command.front()
          << "' not found or not executable on this host\n";
    out << "  lease:      ttl " << config::format_duration(lease.ttl) << ", transition "
        << config::format_duration(lease.transition) << ", stop_grace "
        << config::format_duration(config->stop_grace_for(s, defaults)) << ", kill_grace "
        << config::format_duration(config->kill_grace_for(s, defaults)) << "\n";
    out << "  timeout:    "
        << (s.timeout.count() > 0 ? config::format_duration(s.timeout) : std::string("none"))
        << ", misfire " << (s.misfire == misfire_policy::skip ? "skip" : "run_once") << "\n";
    if (const auto* every = std::get_if<every_trigger>(&s.when)) {
      out << "  next fires: (if a node took the schedule over now, with no fire recorded)\n";
      auto t = std::chrono::ceil<std::chrono::seconds>(now) + every->initial_delay;
      for (int i = 0; i < 3; ++i, t += every->period) out << "    " << utc(t) << "\n";
    } else {
      const auto& cron = std::get<cron_trigger>(s.when).expression;
      if (cron.never_fires()) {
        std::cerr << config->source << ": " << s.path << "/cron: warning: '" << cron.text()
                  << "' can never fire (no allowed month has any of its days)\n";
      }
      const auto times = cron.next_n(now, 3);
      out << "  next fires:" << (times.empty() ? " none" : "")
          << (cron.never_fires() ? " (never: no allowed month has any of its days)" : "") << "\n";
      for (const auto& t : times) {
        out << "    " << utc(t);
        if (cron.time_zone() != "UTC") out << "  " << local(t, cron.time_zone());
        out << "\n";
      }
    }
  }
  return exit_ok;
}

// ---------------------------------------------------------------------------------------------

int status(const command_line& cl) {
  auto config = load_or_report(cl);
  if (!config) return exit_usage;
  configure_logging(cl.log_level.value_or("warn"));
  runtime rt;
  int failed = exit_ok;
  // Read-only: looking creates and changes nothing (no database file, table, key or node).
  auto backend = make_configured_backend(
      *config, rt, failed,
      [](const std::string& why) { std::cerr << "baton status: " << why << "\n"; }, true);
  if (!backend) return failed;
  std::ostream& out = std::cout;
  out << "backend: " << describe_backend(config->backend) << " (times are the backend's clock)\n";
  {
    watchdog guard(status_deadline, "the " + config->backend.type + " backend");
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
        nothing_stored = true;
      } catch (const std::exception& e) {
        std::cerr << "baton status: cannot read schedule '" << s.name << "' from the "
                  << config->backend.type
                  << " backend: " << scrub_secrets(config->backend, e.what()) << "\n";
        return exit_failure;
      }
      out << "\n" << s.name << ": " << config::describe(s.when) << "\n";
      if (!owner.empty()) {
        out << "  owner:      " << owner.owner_id << " (fence " << owner.fence << ")\n";
        out << "  acquired:   " << utc(owner.acquired_at) << "\n";
        out << "  ttl_at:     " << utc(owner.ttl_at) << "  (the owner renews from here)\n";
        out << "  transition: " << utc(owner.transition_at)
            << "  (others may take over after this)\n";
      } else if (owner.fence > 0) {
        out << "  owner:      none (last fence " << owner.fence << ")\n";
      } else {
        out << "  owner:      none (never held)\n";
      }
      if (auto recorded = baton::detail::parse_schedule_state(state)) {
        out << "  last fire:  " << utc(recorded->last_fire) << " (fence " << recorded->fence << ")";
        if (recorded->last_end) out << ", run ended " << utc(*recorded->last_end);
        out << "\n";
      } else if (state.empty()) {
        out << "  last fire:  none recorded\n";
      } else {
        out << "  state:      " << state << " (unrecognized)\n";
      }
    }
  }
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
  if (expr->never_fires()) {
    std::cerr << "baton calendar: warning: '" << cl.expression
              << "' can never fire (no allowed month has any of its days)\n";
  }
  const auto times = expr->next_n(from, cl.count);
  for (const auto& t : times) {
    std::cout << utc(t);
    if (cl.time_zone != "UTC") std::cout << "  " << local(t, cl.time_zone);
    std::cout << "\n";
  }
  if (times.size() < cl.count && !expr->never_fires())
    std::cerr << "baton calendar: " << (times.empty() ? "no" : "no more")
              << " fire times within 400 years\n";
  return exit_ok;
}

}  // namespace baton::daemon
