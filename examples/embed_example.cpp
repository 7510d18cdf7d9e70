// Embedding baton in a service: one schedule whose job is a lambda. Run it in two terminals on
// the same SQLite file: only one prints at a time; stop that one (Ctrl-C) and the other carries on
// the cadence with a higher fence.
//
//   baton_embed_example [DB_FILE]        (default: baton-embed-example.db in the current directory)
#include <pthread.h>
#include <signal.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <utility>

#include "baton/backends/factory.hpp"
#include "baton/mutex/runtime.hpp"
#include "baton/scheduler/cron.hpp"
#include "baton/scheduler/scheduler.hpp"

using namespace std::chrono_literals;

int main(int argc, char** argv) {
  // Take SIGINT/SIGTERM on this thread (below) instead of dying with the lease held.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  // 1. The threads every mutex and timer runs on.
  baton::runtime rt;

  // 2. A backend, chosen by configuration (here SQLite; "postgresql", "redis", ... work alike).
  baton::backend_config where{"sqlite", {{"path", argc > 1 ? argv[1] : "baton-embed-example.db"}}};
  auto backend = baton::make_backend(where, rt);

  // 3. A scheduler with a short lease, so that a takeover after a crash is quick to watch.
  baton::contend_options lease = backend->default_options();
  lease.ttl = 4s;
  lease.transition = 2s;
  baton::scheduler_options options;
  options.lease = lease;
  // Spread the schedules over the nodes that run this program (each leads about S/N of
  // them); off by default in the library: the first node to ask leads everything.
  options.balance.enabled = true;
  baton::scheduler scheduler(*backend, rt, options);

  // 4. A schedule: every 2 s, on whichever node holds the mutex "embedded-hello".
  baton::schedule_options hello;
  hello.name = "embedded-hello";
  hello.when = baton::every_trigger{std::chrono::milliseconds{2s}};
  hello.job = [](const baton::job_context& ctx) {
    // The fence grows with every change of leader: pass it to whatever the job writes, so
    // that storage can reject a stale leader's late writes.
    std::printf("%s: fence %llu, planned fire %s\n", ctx.schedule.c_str(),
                static_cast<unsigned long long>(ctx.fence),
                baton::format_rfc3339_utc(ctx.fire_time).c_str());
    std::fflush(stdout);
  };
  scheduler.add(std::move(hello));
  scheduler.start();
  std::printf("contending as %s; Ctrl-C to stop\n", scheduler.contender_id().c_str());
  std::fflush(stdout);

  int sig = 0;
  sigwait(&stop_signals, &sig);
  // 5. Stop firing, let a running job finish (up to 2 s), release so another node takes over now.
  scheduler.stop(2s);
  std::printf("released\n");
  return 0;
}
