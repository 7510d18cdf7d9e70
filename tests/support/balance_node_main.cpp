// baton_balance_node: one cluster node as a separate process (a scheduler with balance on), so
// that a test can kill -9 it while in-process nodes carry on.
//   baton_balance_node --type T [--param k=v]... --node ID --prefix P --schedules N --log FILE
//                      [--period-ms 1000] [--heartbeat-ms 300] [--ttl-ms 1000] [--retry-ms 100]
//                      [--handoff-rate 20]
// Runs schedules P-0 .. P-(N-1), every period, each lease ttl = transition = ttl-ms. Each run
// appends "start NODE SCHEDULE FENCE FIRE_MS START_NS" to FILE when it begins and "end NODE
// SCHEDULE FENCE FIRE_MS START_NS END_NS" when it ends (CLOCK_MONOTONIC ns, planned fire time in
// ms since the epoch), each with a single O_APPEND write. Prints "READY" once started; on SIGTERM
// stops the scheduler, prints "STOPPED" and exits 0.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <iostream>
#include <thread>

#include "baton/backends/factory.hpp"
#include "baton/mutex/log.hpp"
#include "baton/scheduler/scheduler.hpp"
#include "support/lease.hpp"
#include "support/process.hpp"

using namespace std::chrono_literals;

namespace {

struct arguments {
  baton::backend_config backend;
  std::string node;
  std::string prefix;
  int schedules = 0;
  std::string log;
  std::chrono::milliseconds period{1000};
  std::chrono::milliseconds heartbeat{300};
  std::chrono::milliseconds ttl{1000};
  std::chrono::milliseconds retry{100};
  double handoff_rate = 20;
};

arguments parse(int argc, char** argv) {
  arguments a;
  for (int i = 1; i < argc; ++i) {
    const std::string key = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument("missing value for " + key);
    const std::string value = argv[++i];
    const auto ms = [&] { return std::chrono::milliseconds{std::stoll(value)}; };
    if (key == "--type") {
      a.backend.type = value;
    } else if (key == "--param") {
      const auto eq = value.find('=');
      if (eq == std::string::npos) throw std::invalid_argument("--param needs key=value");
      a.backend.params[value.substr(0, eq)] = value.substr(eq + 1);
    } else if (key == "--node") {
      a.node = value;
    } else if (key == "--prefix") {
      a.prefix = value;
    } else if (key == "--schedules") {
      a.schedules = std::stoi(value);
    } else if (key == "--log") {
      a.log = value;
    } else if (key == "--period-ms") {
      a.period = ms();
    } else if (key == "--heartbeat-ms") {
      a.heartbeat = ms();
    } else if (key == "--ttl-ms") {
      a.ttl = ms();
    } else if (key == "--retry-ms") {
      a.retry = ms();
    } else if (key == "--handoff-rate") {
      a.handoff_rate = std::stod(value);
    } else {
      throw std::invalid_argument("unknown argument " + key);
    }
  }
  if (a.node.empty() || a.prefix.empty() || a.schedules <= 0 || a.log.empty())
    throw std::invalid_argument("--node, --prefix, --schedules and --log are required");
  return a;
}

void say(const std::string& line) {
  const std::string out = line + "\n";
  (void)!::write(STDOUT_FILENO, out.data(), out.size());
}

}  // namespace

int main(int argc, char** argv) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  try {
    const auto a = parse(argc, argv);
    const int fd = ::open(a.log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) throw std::runtime_error("cannot open " + a.log);
    baton::set_log_level(baton::log_level::warn);  // the test reads its runs, not its log
    baton::runtime rt;
    auto backend = baton::make_backend(a.backend, rt);
    baton::scheduler_options o;
    o.contender_id = a.node;
    o.lease = baton::test::lease_options(a.ttl, a.retry);
    o.balance.enabled = true;
    o.balance.node_id = a.node;
    o.balance.heartbeat = a.heartbeat;
    o.balance.handoff_rate = a.handoff_rate;
    baton::scheduler s(*backend, rt, o);
    for (int i = 0; i < a.schedules; ++i) {
      baton::schedule_options so;
      so.name = a.prefix + "-" + std::to_string(i);
      so.when = baton::every_trigger{a.period};
      so.history = 0;
      so.job = [fd, node = a.node](const baton::job_context& ctx) {
        const long long fire_ms =
            std::chrono::duration_cast<std::chrono::milliseconds>(ctx.fire_time.time_since_epoch())
                .count();
        const long long start = baton::test::mono_ns();
        const std::string head = node + " " + ctx.schedule + " " + std::to_string(ctx.fence) + " " +
                                 std::to_string(fire_ms) + " " + std::to_string(start);
        const std::string begin = "start " + head + "\n";
        (void)!::write(fd, begin.data(), begin.size());
        std::this_thread::sleep_for(10ms);
        const std::string end = "end " + head + " " + std::to_string(baton::test::mono_ns()) + "\n";
        (void)!::write(fd, end.data(), end.size());
      };
      s.add(std::move(so));
    }
    s.start();
    say("READY");
    int sig = 0;
    sigwait(&set, &sig);
    s.stop(1s);
    ::close(fd);
    say("STOPPED");
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "baton_balance_node: " << e.what() << "\n";
    return 2;
  }
}
