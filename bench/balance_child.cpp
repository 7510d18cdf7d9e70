// baton_balance_child: one node of the balance benchmark's lateness workload (balance_bench.cpp).
//   baton_balance_child --type T [--param k=v]... --node ID --prefix P --count N --out FILE
//                       [--cron EXPR] [--balance 0|1] [--heartbeat MS] [--rate R]
// A scheduler (balance on unless --balance 0) with N schedules P0 .. P<N-1> firing on EXPR
// (default "* * * * *", UTC) whose job only notes when it started. Prints "READY" once the
// schedules are added, starts contending on the stdin line "START" (so that every node of a
// cluster starts at the same moment), then prints "STAT <leads> <assigned> <runs> <handoffs>"
// every 500 ms (leads and assigned as the balancer last counted them). On "STOP" (or the end of
// stdin) it stops gracefully, writes one line per run, "<schedule index> <planned fire us>
// <start us>" (microseconds since the epoch, this host's wall clock), to FILE, then "LOG <phase>
// <event> <count>" lines (warnings and errors before and after the stdin line "MARK") and "DONE".
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "baton/backends/factory.hpp"
#include "baton/mutex/log.hpp"
#include "baton/scheduler/scheduler.hpp"

namespace {

using namespace std::chrono_literals;

long long micros(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

struct run {
  std::size_t schedule;
  long long fire_us;
  long long start_us;
};

/// Every run's planned and actual start, noted by the jobs (on the job pool's threads).
class run_log {
 public:
  run_log() { runs_.reserve(100'000); }
  void note(std::size_t schedule, std::chrono::system_clock::time_point fire) {
    const auto now = std::chrono::system_clock::now();
    std::lock_guard lock(mutex_);
    runs_.push_back({schedule, micros(fire), micros(now)});
  }
  std::size_t size() const {
    std::lock_guard lock(mutex_);
    return runs_.size();
  }
  void write(const std::string& path) const {
    std::lock_guard lock(mutex_);
    std::ofstream out(path);
    for (const auto& r : runs_) out << r.schedule << ' ' << r.fire_us << ' ' << r.start_us << '\n';
    if (!out) throw std::runtime_error("cannot write " + path);
  }

 private:
  mutable std::mutex mutex_;
  std::vector<run> runs_;
};

/// Warnings and errors by event key, before and after the "MARK" line (the measured fires):
/// the first of each key goes to stderr, the counts to stdout at the end ("LOG <phase> <event>
/// <count>"), so that a flood of 10,000 alike lines does not bury the benchmark's output.
class log_counter {
 public:
  explicit log_counter(std::string node) : node_(std::move(node)) {}
  void note(const baton::log_record& r) {
    const std::string event = r.event.empty() ? "other" : std::string(r.event);
    std::lock_guard lock(mutex_);
    if (++counts_[marked_][event] == 1)
      std::cerr << node_ << ": " << baton::to_string(r.level) << " " << event << ": [" << r.schedule
                << "] " << r.message << " (the first of its kind"
                << (marked_ ? " in the window" : "") << ")\n";
  }
  void mark() {
    std::lock_guard lock(mutex_);
    marked_ = 1;
  }
  void print() const {
    std::lock_guard lock(mutex_);
    for (int phase = 0; phase < 2; ++phase)
      for (const auto& [event, n] : counts_[phase])
        std::printf("LOG %s %s %zu\n", phase ? "window" : "start", event.c_str(), n);
  }

 private:
  std::string node_;
  mutable std::mutex mutex_;
  int marked_ = 0;
  std::map<std::string, std::size_t> counts_[2];
};

}  // namespace

int main(int argc, char** argv) try {
  baton::backend_config config;
  std::string node, prefix = "lateness-", out, cron = "* * * * *";
  std::size_t count = 0;
  bool balance = true;
  long heartbeat_ms = 1000;
  double rate = 5.0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string key = argv[i], value = argv[i + 1];
    if (key == "--type") {
      config.type = value;
    } else if (key == "--param") {
      const auto eq = value.find('=');
      if (eq == std::string::npos) throw std::invalid_argument("--param needs key=value");
      config.params[value.substr(0, eq)] = value.substr(eq + 1);
    } else if (key == "--node") {
      node = value;
    } else if (key == "--prefix") {
      prefix = value;
    } else if (key == "--count") {
      count = std::stoul(value);
    } else if (key == "--out") {
      out = value;
    } else if (key == "--cron") {
      cron = value;
    } else if (key == "--balance") {
      balance = value != "0";
    } else if (key == "--heartbeat") {
      heartbeat_ms = std::stol(value);
    } else if (key == "--rate") {
      rate = std::stod(value);
    } else {
      throw std::invalid_argument("unknown argument " + key);
    }
  }
  if (node.empty() || out.empty() || count == 0)
    throw std::invalid_argument("--node, --out and --count are required");
  log_counter logs(node);
  baton::set_log_handler([&logs](const baton::log_record& r) { logs.note(r); },
                         baton::log_level::warn);

  run_log runs;  // before the scheduler: its jobs write here until it is gone
  baton::runtime rt;
  auto backend = baton::make_backend(config, rt);
  baton::scheduler_options options;
  options.contender_id = node + "@" + std::to_string(getpid());
  options.balance.enabled = balance;
  options.balance.node_id = node;
  options.balance.heartbeat = std::chrono::milliseconds{heartbeat_ms};
  options.balance.handoff_rate = rate;
  baton::scheduler sched(*backend, rt, options);
  const auto when = baton::cron_trigger{baton::cron_expression::parse(cron, "UTC")};
  for (std::size_t i = 0; i < count; ++i) {
    baton::schedule_options s;
    s.name = prefix + std::to_string(i);
    s.when = when;
    s.job = [&runs, i](const baton::job_context& ctx) { runs.note(i, ctx.fire_time); };
    sched.add(std::move(s));
  }
  std::printf("READY\n");
  std::fflush(stdout);

  std::atomic<bool> start{false}, stop{false};
  std::thread reader([&] {
    for (std::string line; std::getline(std::cin, line);) {
      if (line == "START") start = true;
      if (line == "MARK") logs.mark();
      if (line == "STOP") break;
    }
    stop = true;
  });
  while (!start && !stop) std::this_thread::sleep_for(5ms);
  if (start) sched.start();
  while (!stop) {
    // The balancer's counts (refreshed every heartbeat): status() of 10,000 schedules every
    // 500 ms would cost this node CPU in the middle of the fires it is measured on.
    const auto b = sched.balance();
    std::printf("STAT %zu %zu %zu %llu\n", b.leads, b.assigned, runs.size(),
                static_cast<unsigned long long>(b.handoffs));
    std::fflush(stdout);
    for (int i = 0; i < 100 && !stop; ++i) std::this_thread::sleep_for(5ms);
  }
  reader.join();
  sched.stop(5s);
  runs.write(out);
  logs.print();
  baton::set_log_handler({});
  std::printf("DONE %zu\n", runs.size());
  std::fflush(stdout);
  return 0;
} catch (const std::exception& e) {
  std::cerr << "baton_balance_child: " << e.what() << "\n";
  return 1;
}
