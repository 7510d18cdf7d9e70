// baton run: one scheduler over the configured backend, stopped gracefully on SIGTERM/SIGINT.
#include <pthread.h>
#include <signal.h>
#include <time.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <thread>

#include <spdlog/spdlog.h>

#include "baton/backends/factory.hpp"
#include "baton/config/duration.hpp"
#include "baton/mutex/runtime.hpp"
#include "baton/scheduler/scheduler.hpp"
#include "commands.hpp"
#include "output.hpp"

namespace baton::daemon {

namespace {

spdlog::logger& log() {
  static auto logger = spdlog::get("baton");
  return *logger;
}

const char* signal_name(int sig) {
  switch (sig) {
    case SIGTERM:
      return "SIGTERM";
    case SIGINT:
      return "SIGINT";
    default:
      return "a signal";
  }
}

}  // namespace

int run(const command_line& cl) {
  // Taken by the main thread with sigwait: block them before any thread exists, so every
  // thread inherits the mask (command jobs reset signal mask and handlers in the child).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);

  auto config = load_or_report(cl);
  if (!config) return exit_usage;
  configure_logging(cl.log_level.value_or(config->log_level));
  log().info("baton {} starting: config {}, backend {}, {} schedule(s)", version(), config->source,
             describe_backend(config->backend), config->schedules.size());

  runtime rt;
  std::shared_ptr<mutex_backend> backend;
  try {
    backend = make_backend(config->backend, rt);
  } catch (const std::invalid_argument& e) {
    std::cerr << config->source << ": /backend: " << e.what() << "\n";
    return exit_usage;
  } catch (const std::exception& e) {
    log().error("cannot set up the {} backend: {}", config->backend.type, e.what());
    return exit_failure;
  }
  const contend_options defaults = backend->default_options();

  std::unique_ptr<scheduler> sched;
  try {
    sched = std::make_unique<scheduler>(*backend, rt,
                                        config::make_scheduler_options(*config, defaults));
  } catch (const std::invalid_argument& e) {
    std::cerr << config->source << ": /lease: " << e.what() << "\n";
    return exit_usage;
  }
  std::chrono::milliseconds grace{0};
  for (const auto& s : config->schedules) {
    try {
      sched->add(config::make_schedule_options(*config, s, defaults));
    } catch (const std::invalid_argument& e) {
      std::cerr << config->source << ": " << s.path << ": " << e.what() << "\n";
      return exit_usage;
    }
    grace = std::max(grace, config->kill_grace_for(s, defaults));
    if (find_program(s.command.front()).empty())
      log().warn("schedule '{}': program '{}' not found (or not executable); its runs will fail",
                 s.name, s.command.front());
    const auto lease = config->lease_for(s, defaults);
    log().info(
        "schedule '{}': {}, lease ttl {} transition {} poll {}, stop_grace {}, kill_grace {}",
        s.name, config::describe(s.when), config::format_duration(lease.ttl),
        config::format_duration(lease.transition), config::format_duration(lease.poll_interval),
        config::format_duration(config->stop_grace_for(s, defaults)),
        config::format_duration(config->kill_grace_for(s, defaults)));
  }
  // Jobs get SIGTERM, then SIGKILL after kill_grace: wait that long plus time to reap them.
  grace += std::chrono::seconds{1};

  sched->start();
  log().info("running as contender {}", sched->contender_id());

  int sig = 0;
  while (sigwait(&stop_signals, &sig) != 0) {
  }
  log().info(
      "received {}: stopping; waiting up to {} for running jobs, then releasing every "
      "mutex (send it again to exit at once)",
      signal_name(sig), config::format_duration(grace));

  std::atomic<bool> stopped{false};
  std::thread stopper([&] {
    sched->stop(grace);
    stopped = true;
  });
  while (!stopped) {
    timespec tick{0, 20'000'000};
    const int again = sigtimedwait(&stop_signals, nullptr, &tick);
    if (again > 0) {
      log().warn(
          "received {} while stopping: exiting at once without releasing (jobs die "
          "with the daemon; other nodes take over when the lease expires)",
          signal_name(again));
      log().flush();
      std::_Exit(128 + again);
    }
  }
  stopper.join();
  sched.reset();
  backend.reset();
  rt.stop();
  log().info("stopped");
  return exit_ok;
}

}  // namespace baton::daemon
