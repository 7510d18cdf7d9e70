// baton run: one scheduler over the configured backend, stopped gracefully on SIGTERM/SIGINT,
// its config reloaded on SIGHUP.
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <thread>

#include "baton/backends/factory.hpp"
#include "baton/config/duration.hpp"
#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/runtime.hpp"
#include "baton/scheduler/scheduler.hpp"
#include "commands.hpp"
#include "console.hpp"
#include "http.hpp"
#include "output.hpp"
#include "stall_detector.hpp"
#include "stop_policy.hpp"
#include "systemd_notify.hpp"

namespace baton::daemon {

namespace {

using std::chrono::milliseconds;

using detail::log;

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    case SIGHUP:
      return "SIGHUP";
    case SIGUSR1:
      return "SIGUSR1";
    case SIGUSR2:
      return "SIGUSR2";
    default:
      return "a signal";
  }
}

/// What the daemon keeps of one running schedule.
struct running_schedule {
  std::string fingerprint;  // config::fingerprint: equal on reload = unchanged
  milliseconds kill_grace{0};
};

/// Adds `s` to the scheduler and logs how it runs.
void start_schedule(scheduler& sched, const config::daemon_config& config,
                    const config::schedule_config& s, const contend_options& defaults,
                    std::map<std::string, running_schedule>& running) {
  // Built once: what the scheduler gets is also what the log shows.
  auto options = config::make_schedule_options(config, s, defaults);
  const contend_options lease = options.lease.value_or(defaults);
  const milliseconds stop_grace = options.stop_grace.value_or(milliseconds{0});
  const milliseconds kill_grace = config.kill_grace_for(s, defaults);
  sched.add(std::move(options));
  running[s.name] = {config::fingerprint(config, s, defaults), kill_grace};
  if (find_program(s.command.front()).empty())
    log({.schedule = s.name, .event = "schedule.program_missing"})
        .warn("program '{}' not found (or not executable); its runs will fail", s.command.front());
  log({.schedule = s.name, .event = "schedule.started"})
      .info("{}, lease ttl {} transition {} poll {}, stop_grace {}, kill_grace {}",
            config::describe(s.when), config::format_duration(lease.ttl),
            config::format_duration(lease.transition), config::format_duration(lease.poll_interval),
            config::format_duration(stop_grace), config::format_duration(kill_grace));
}

/// How long stopping may wait for jobs: the longest kill_grace, plus time to reap.
milliseconds stop_wait(const std::map<std::string, running_schedule>& running) {
  milliseconds grace{0};
  for (const auto& [name, r] : running) grace = std::max(grace, r.kill_grace);
  return grace + std::chrono::seconds{1};
}

/// SIGUSR1 (drain) and SIGUSR2 (end the drain): the balancer logs node.drain_requested /
/// node.drain_cancelled when the request changes something.
void drain_signal(scheduler& sched, bool balance_on, int sig) {
  const bool on = sig == SIGUSR1;
  if (!balance_on) {
    log({.event = "node.drain_ignored"})
        .warn(
            "received {}: ignored: balance is off (\"balance\": false), so this node cannot "
            "hand its schedules over; stop it instead (its schedules move when its leases end)",
            signal_name(sig));
    return;
  }
  log({.event = "node.drain_signal"})
      .info("received {}: {}", signal_name(sig),
            on ? "draining: handing every schedule to the other nodes, then contending for none "
                 "(SIGUSR2 ends the drain)"
               : "ending the drain: taking a fair share again");
  try {
    sched.drain(on);
  } catch (const std::exception& e) {
    log({.event = "node.drain_failed"}).error("{} failed: {}", signal_name(sig), e.what());
  }
}

/// SIGHUP: reads the config again and applies what changed. Schedules whose fingerprint did not
/// change keep their lease and cadence; removed ones stop their job and release their mutex;
/// changed ones are removed and added again (the cadence carries on from the recorded last
/// fire); added ones start contending. A config with errors, or with another backend, is
/// refused as a whole and the running one stays. True when applied.
bool reload(const command_line& cl, config::daemon_config& current, scheduler& sched,
            std::map<std::string, running_schedule>& running, const balance_options& started) {
  log({.event = "reload.requested"}).info("received SIGHUP: reloading {}", cl.config);
  std::vector<std::string> errors;
  std::size_t error_count = 0;
  std::optional<config::daemon_config> next;
  try {
    next = config::load_config(cl.config);
  } catch (const config::config_error& e) {
    errors = e.errors();
    error_count = e.count();
  }
  if (next && (next->backend.type != current.backend.type ||
               next->backend.params != current.backend.params)) {
    log({.event = "reload.rejected"})
        .error(
            "reload rejected: {}: /backend changed ({} -> {}); switching backends needs a restart "
            "of the daemon; the running config stays",
            cl.config, describe_backend(current.backend), describe_backend(next->backend));
    return false;
  }
  if (!errors.empty()) {
    for (const auto& e : errors) log({.event = "reload.rejected"}).error("reload rejected: {}", e);
    log({.event = "reload.rejected"})
        .error("reload rejected: {} error{} in {}; the running config stays", error_count,
               error_count == 1 ? "" : "s", cl.config);
    return false;
  }

  // The backend is unchanged, so are its lease defaults; load_config() checked every schedule
  // against them, as at start-up.
  const contend_options& defaults = next->backend_defaults;
  std::map<std::string, const config::schedule_config*> wanted;
  for (const auto& s : next->schedules) wanted[s.name] = &s;
  std::size_t added = 0, removed = 0, changed = 0, unchanged = 0;
  // Removed and changed schedules end first (their jobs stop, their mutexes are released).
  for (auto it = running.begin(); it != running.end();) {
    const auto& [name, r] = *it;
    auto w = wanted.find(name);
    const bool keep =
        w != wanted.end() && config::fingerprint(*next, *w->second, defaults) == r.fingerprint;
    if (keep) {
      ++unchanged;
      ++it;
      continue;
    }
    sched.remove(name, r.kill_grace + std::chrono::seconds{1});
    if (w == wanted.end()) {
      ++removed;
      log({.schedule = name, .event = "schedule.removed"})
          .info("reload: removed: its job was stopped and its mutex released");
    }
    it = running.erase(it);
  }
  sched.reserve_job_threads(static_cast<unsigned>(
      std::min<std::size_t>(next->schedules.size(), config::daemon_job_threads())));
  for (const auto& s : next->schedules) {
    if (running.count(s.name) != 0) continue;
    const bool existed = std::any_of(current.schedules.begin(), current.schedules.end(),
                                     [&](const auto& c) { return c.name == s.name; });
    start_schedule(sched, *next, s, defaults, running);
    if (existed) {
      ++changed;
      log({.schedule = s.name, .event = "schedule.changed"})
          .info("reload: changed: restarted with the new definition ({})",
                config::describe(s.when));
    } else {
      ++added;
      log({.schedule = s.name, .event = "schedule.added"})
          .info("reload: added ({})", config::describe(s.when));
    }
  }
  if ((next->log_level != current.log_level && !cl.log_level) ||
      (next->log_format != current.log_format && !cl.log_format))
    configure_logging(cl.log_level.value_or(next->log_level),
                      cl.log_format.value_or(next->log_format));
  if (next->http_listen != current.http_listen && !cl.http_listen)
    log({.event = "reload.http_listen_unchanged"})
        .warn("reload: {}: /http/listen changed: the HTTP listener moves only on a restart",
              cl.config);
  // `node` and `balance` are the scheduler's: compared with what it started with, so that every
  // reload until the restart says so.
  const balance_options& b = next->balance;
  if (b.node_id != started.node_id || b.tags != started.tags)
    log({.event = "reload.node_unchanged"})
        .warn("reload: {}: /node changed ({} -> {}): takes effect on restart", cl.config,
              node_text(started), node_text(b));
  if (b.enabled != started.enabled || b.heartbeat != started.heartbeat ||
      b.member_timeout != started.member_timeout || b.settle != started.settle ||
      b.handoff_rate != started.handoff_rate)
    log({.event = "reload.balance_unchanged"})
        .warn("reload: {}: /balance changed ({} -> {}): takes effect on restart", cl.config,
              balance_text(started), balance_text(b));
  log({.event = "reload.applied"})
      .info("reload of {} applied: {} added, {} removed, {} changed, {} unchanged", cl.config,
            added, removed, changed, unchanged);
  current = std::move(*next);
  return true;
}

/// STATUS= for systemd: one short line.
std::string ready_status(const config::daemon_config& config, const scheduler& sched) {
  return std::to_string(config.schedules.size()) + " schedule(s), contender " +
         sched.contender_id();
}

}  // namespace

int run(const command_line& cl) {
  // Taken by the main thread with sigwait: block them before any thread exists, so every
  // thread inherits the mask (the job supervisor resets mask and handlers in its child).
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  sigaddset(&signals, SIGUSR1);
  sigaddset(&signals, SIGUSR2);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  sigset_t stop_signals = signals;
  sigdelset(&stop_signals, SIGHUP);
  sigdelset(&stop_signals, SIGUSR1);
  sigdelset(&stop_signals, SIGUSR2);
  ::signal(SIGPIPE, SIG_IGN);

  // load_config() checks everything the scheduler will, against the lease defaults of the
  // configured backend (computed from its parameters, as `validate` does): a bad config exits 2
  // here, before the backend is built or contacted.
  auto config = load_or_report(cl);
  if (!config) return exit_usage;
  configure_logging(cl.log_level.value_or(config->log_level),
                    cl.log_format.value_or(config->log_format));
  log({.event = "daemon.starting"})
      .info("baton {} starting: config {}, backend {}, {} schedule(s)", version(), config->source,
            describe_backend(config->backend), config->schedules.size());
  if (const auto* d = find_backend(config->backend.type); d && !d->process_local.empty())
    log().warn("{}: /backend/type: SINGLE PROCESS ONLY: {}", config->source, d->process_local);

  // The console's control token (http.allow_control): read now, so that a missing variable or a
  // token file others may read ends the start with exit 2, before anything is contacted.
  std::string console_token;
  if (config->console.enabled && (config->http_listen || cl.http_listen)) {
    try {
      console_token = config::read_console_token(*config);
    } catch (const config::config_error& e) {
      for (const auto& message : e.errors()) log({.event = "daemon.failed"}).error("{}", message);
      return exit_usage;
    }
  }

  runtime rt;
  // Logs `process.stalled` when the process (or its io threads) did not run for a while
  // (SIGSTOP, CPU starvation): leases may have run out locally meanwhile. Stopped before `rt`.
  stall_detector stalls(rt.io());
  // HTTP: /metrics, /healthz, /readyz (http.hpp); off unless http.listen or --http-listen.
  std::unique_ptr<http_endpoints> http;
  try {
    http = start_http_endpoints(cl.http_listen, *config, rt, version());
  } catch (const std::exception& e) {
    log().error("{}", e.what());
    return exit_failure;
  }
  int failed = exit_ok;
  auto backend = make_configured_backend(*config, rt, failed, [](const std::string& why) {
    log({.event = "daemon.failed"}).error("{}", why);
  });
  if (!backend) return failed;
  // The same defaults the config was checked against (the backend's descriptor computes both).
  const contend_options defaults = config->backend_defaults;
  auto scheduler_options = config::make_scheduler_options(*config, defaults);
  // What the scheduler keeps until a restart (a reload that changes it says so).
  const balance_options started_balance = scheduler_options.balance;
  auto sched = std::make_unique<scheduler>(*backend, rt, std::move(scheduler_options));
  std::map<std::string, running_schedule> running;
  for (const auto& s : config->schedules) start_schedule(*sched, *config, s, defaults, running);

  sched->start();
  if (http)
    http->attach(*sched, backend, config->schedules.front().name,
                 [b = config->backend](const std::string& text) { return scrub_secrets(b, text); });
  // The web console (http.console): its own pool and backend instance, never the lease path's.
  auto start_console = [&](const config::daemon_config& c) {
    if (http && c.console.enabled)
      http->set_console(
          std::make_shared<console>(c, version(), sched->contender_id(), console_token));
  };
  start_console(*config);
  const config::console_config started_console = config->console;
  // The server reads the scheduler: whatever way this scope ends (an exception included), it stops
  // before `sched` is destroyed (declared after it, so destroyed first). Idempotent.
  struct http_stopper {
    http_endpoints* endpoints;
    ~http_stopper() {
      if (endpoints) endpoints->stop();
    }
  } stop_http_first{http.get()};
  log({.event = "daemon.started"})
      .info("running as contender {} (jobs run under a per-run supervisor, a child subreaper)",
            sched->contender_id());
  log({.event = "node.started"})
      .info("node {}; balance {}{}", node_text(started_balance), balance_text(started_balance),
            started_balance.enabled ? "; SIGUSR1 drains this node, SIGUSR2 ends the drain" : "");
  // systemd (Type=notify): READY/RELOADING/STOPPING and the watchdog; a no-op without
  // NOTIFY_SOCKET. Declared after `rt`, so its watchdog thread ends before the runtime.
  systemd_notifier systemd(rt);
  systemd.ready(ready_status(*config, *sched));

  int sig = 0;
  while (true) {
    if (sigwait(&signals, &sig) != 0) continue;
    if (sig == SIGUSR1 || sig == SIGUSR2) {
      drain_signal(*sched, started_balance.enabled, sig);
      continue;
    }
    if (sig != SIGHUP) break;
    bool applied = false;
    systemd.reloading();
    try {
      applied = reload(cl, *config, *sched, running, started_balance);
    } catch (const std::exception& e) {
      log({.event = "reload.failed"}).error("reload failed: {}", e.what());
    }
    if (http) http->count_reload(applied);
    if (applied && config->console != started_console)
      log({.event = "reload.console_unchanged"})
          .warn(
              "reload: {}: /http/console, allow_control, token_env or token_file changed: "
              "takes effect on restart",
              cl.config);
    if (applied && started_console.enabled) {
      // The console shows the reloaded schedules, with the settings it started with.
      auto c = *config;
      c.console = started_console;
      start_console(c);
    }
    systemd.ready(ready_status(*config, *sched));  // also after a rejected reload
  }
  if (http) http->stopping();
  stalls.stop();  // a graceful stop may block io threads on purpose
  systemd.stopping(std::string("stopping on ") + signal_name(sig));
  using clock = std::chrono::steady_clock;
  const clock::time_point since = clock::now();  // next_stop_step: stop_gracefully
  const milliseconds grace = stop_wait(running);
  const milliseconds stop_timeout = config->stop_timeout_for(defaults);
  log({.event = "daemon.stopping"})
      .info(
          "received {}: stopping; waiting up to {} for running jobs, then releasing every mutex "
          "(stop_timeout {}; SIGTERM again is ignored, SIGINT again exits at once)",
          signal_name(sig), config::format_duration(grace), config::format_duration(stop_timeout));

  // The whole graceful stop runs on its own thread, so that the main thread keeps answering
  // signals and can give up at stop_timeout whatever the stop is waiting for.
  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    sched->stop(grace);
    if (http) http->stop();  // before the scheduler it reads goes
    sched.reset();
    backend.reset();
    rt.stop();
    stopped = true;
  });
  while (!stopped) {
    timespec tick{0, 20'000'000};
    const int again = sigtimedwait(&stop_signals, nullptr, &tick);
    const auto now = clock::now();
    const auto step = next_stop_step(again > 0 ? std::optional<int>(again) : std::nullopt, since,
                                     now, stop_timeout);
    auto elapsed = [&] {
      return config::format_duration(std::chrono::duration_cast<milliseconds>(now - since));
    };
    switch (step) {
      case stop_step::duplicate:
        log().info(
            "received {} {} after {}: the same stop, delivered twice; still stopping gracefully",
            signal_name(again), elapsed(), signal_name(sig));
        break;
      case stop_step::keep_stopping:
        log().warn(
            "received {} while stopping ({} since {}): ignored; still stopping gracefully "
            "(at most stop_timeout {}; SIGINT exits at once)",
            signal_name(again), elapsed(), signal_name(sig), config::format_duration(stop_timeout));
        break;
      case stop_step::exit_now:
        log().warn(
            "received {} while stopping: exiting at once without releasing (the jobs' "
            "supervisors end them within kill_grace; other nodes take over when the lease "
            "expires)",
            signal_name(again));
        log().flush();
        std::_Exit(128 + again);
      case stop_step::give_up:
        log().error(
            "stop_timeout {} passed since {}: exiting without waiting longer; mutexes not yet "
            "released are taken over when their leases expire, and the jobs' supervisors end "
            "their processes within kill_grace",
            config::format_duration(stop_timeout), signal_name(sig));
        log().flush();
        std::_Exit(exit_failure);
      case stop_step::wait:
      case stop_step::stop_gracefully:  // not while stopping
        break;
    }
  }
  stopper.join();
  log({.event = "daemon.stopped"}).info("stopped");
  return exit_ok;
}

}  // namespace baton::daemon
