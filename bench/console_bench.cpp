// baton_console_bench: figure "console_cost", what the web console costs the lease path (issue
// 20). On SQLite: a `baton run` node with the console on ($BATON_BENCH_DAEMON; 10 schedules)
// shares the database file with this process, which measures in alternating blocks, with and
// without a client polling the node's GET /api/v1/schedules every 100 ms (the same run and
// server state; pair i runs "with" first when i is even):
//   - lock + unlock: one baton::locker on an uncontended mutex, back to back for block_seconds;
//     a sample is one block's mean cycle in microseconds;
//   - handover: two contender children (bench/contender_child.cpp) hand a mutex back and forth
//     (release -> the other's on_acquired, released at a random point of the waiter's poll
//     period), handovers_per_block per block; a sample is one handover in milliseconds.
// Records "console_cost" with subjects "lock_unlock" and "handover": subject "baton" rows carry
// the "with polling" samples, the "floor" rows the "without" ones (report.py's convention), and
// the ratio of the medians, the polls made and their median latency as extras.
//
// Environment: as bench/run.sh sets it (BATON_TEST_TMPDIR, BATON_BENCH_BIN, BATON_BENCH_DAEMON);
// BATON_BENCH_QUICK=1 for fewer pairs. Only JSON records go to stdout.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <random>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "baton/backends/factory.hpp"
#include "baton/mutex/locker.hpp"
#include "common.hpp"
#include "support/http_client.hpp"

namespace {

using namespace baton::bench;
using namespace std::chrono_literals;

constexpr double block_seconds = 0.5;
constexpr int handovers_per_block = 6;
constexpr auto poll_period = 100ms;
constexpr int schedules = 10;

void log(const std::string& line) { std::cerr << "baton_console_bench: " << line << std::endl; }

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The `baton run` node with the console on, its log in a file; the port it got from its log.
struct console_node {
  std::string log_file;
  std::unique_ptr<child_process> process;
  int port = 0;
};

console_node start_node(const baton::backend_config& config, const std::string& tag) {
  const std::string dir = env_or("BATON_TEST_TMPDIR", "/tmp");
  const std::string file = dir + "/console-" + tag + ".json";
  console_node n;
  n.log_file = dir + "/console-" + tag + ".log";
  {
    std::ofstream out(file);
    out << "{\"backend\": {\"type\": \"sqlite\", \"path\": \"" << config.params.at("path")
        << "\"},\n \"log_level\": \"info\",\n"
        << " \"http\": {\"listen\": \"127.0.0.1:0\", \"console\": true},\n \"schedules\": [\n";
    for (int i = 0; i < schedules; ++i)
      out << "  {\"name\": \"console-" << tag << "-" << i
          << "\", \"every\": \"5s\", \"command\": [\"/bin/true\"]}"
          << (i + 1 < schedules ? ",\n" : "\n");
    out << " ]}\n";
  }
  n.process = std::make_unique<child_process>(
      std::vector<std::string>{"/bin/sh", "-c", "exec \"$0\" run --config \"$1\" 2>\"$2\"",
                               env_or("BATON_BENCH_DAEMON", "baton"), file, n.log_file},
      bench_child_options);
  static const std::regex listening("http: listening on 127\\.0\\.0\\.1:([0-9]+)");
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while (n.port == 0) {  // bounded by the deadline
    std::smatch m;
    const auto text = read_all(n.log_file);
    if (std::regex_search(text, m, listening)) {
      n.port = std::stoi(m[1]);
      break;
    }
    if (std::chrono::steady_clock::now() > deadline || n.process->wait_exit(0ms).has_value())
      throw std::runtime_error("the console node did not listen within 60 s: " + text);
    std::this_thread::sleep_for(50ms);
  }
  return n;
}

// Polls GET /api/v1/schedules every poll_period while `on`.
class poller {
 public:
  explicit poller(int port) : port_(port), thread_([this] { loop(); }) {}
  ~poller() {
    quit_ = true;
    thread_.join();
  }
  void set(bool on) { on_ = on; }
  std::vector<double> latencies_ms() {
    std::lock_guard lock(mutex_);
    return latencies_;
  }
  long failures() const { return failures_; }

 private:
  void loop() {
    auto next = std::chrono::steady_clock::now();
    while (!quit_) {  // ends with the destructor
      next += poll_period;
      if (on_) {
        const auto t0 = mono_ns();
        const auto r = baton::test::http_get(port_, "/api/v1/schedules", 5s);
        const double ms = static_cast<double>(mono_ns() - t0) / 1e6;
        if (r.status != 200) ++failures_;
        std::lock_guard lock(mutex_);
        latencies_.push_back(ms);
      }
      std::this_thread::sleep_until(next);
    }
  }

  int port_;
  std::atomic<bool> on_{false};
  std::atomic<bool> quit_{false};
  std::atomic<long> failures_{0};
  std::mutex mutex_;
  std::vector<double> latencies_;
  std::thread thread_;
};

// Two contenders handing one mutex back and forth.
class handover_pair {
 public:
  handover_pair(const baton::backend_config& config, const std::string& mutex) {
    const auto argv = contender_argv(config, mutex);
    a_ = std::make_unique<child_process>(argv, bench_child_options);
    poll_ms_ = std::stoll(field(expect_line(*a_, {"OPTIONS"}, 30s, "OPTIONS line"), 4));
    expect_line(*a_, {"ACQUIRED"}, 30s, "first acquisition");
    b_ = std::make_unique<child_process>(argv, bench_child_options);
    if (expect_line(*b_, {"WAITING", "ACQUIRED"}, 30s, "first observation").rfind("ACQ", 0) == 0)
      throw std::runtime_error("the second contender acquired a held mutex");
    owner_ = a_.get();
    waiter_ = b_.get();
  }
  ~handover_pair() {
    for (auto* c : {a_.get(), b_.get()}) c->send("quit");
    for (auto* c : {a_.get(), b_.get()}) c->wait_exit(20s);
  }

  /// The waiters' poll interval (SQLite waiters poll for a release).
  long long poll_ms() const { return poll_ms_; }

  /// One handover: release -> the waiter's on_acquired, in ms.
  double once() {
    if (!owner_->send("release")) throw std::runtime_error("owner " + owner_->describe());
    const auto acquired = expect_line(*waiter_, {"ACQUIRED"}, 30s, "on_acquired");
    const auto releasing = expect_line(*owner_, {"RELEASING"}, 10s, "RELEASING");
    expect_line(*owner_, {"RELEASED"}, 15s, "RELEASED");
    if (!owner_->send("start")) throw std::runtime_error("contender " + owner_->describe());
    expect_line(*owner_, {"WAITING"}, 30s, "waiting again");
    std::swap(owner_, waiter_);
    return static_cast<double>(last_field(acquired) - last_field(releasing)) / 1e6;
  }

 private:
  std::unique_ptr<child_process> a_, b_;
  child_process* owner_ = nullptr;
  child_process* waiter_ = nullptr;
  long long poll_ms_ = 0;
};

void bench_sqlite(const std::string& type, int pairs) {
  if (type != "sqlite") {
    log(type + ": skipped (the figure is defined on SQLite)");
    return;
  }
  const auto config = backend_config_for(type);
  const std::string tag = std::to_string(::getpid());
  baton::runtime rt;
  auto backend = baton::make_backend(config, rt);
  baton::locker lock(*backend, "console-bench-solo-" + tag, backend->default_options());
  auto node = start_node(config, tag);
  wait_owned(*backend, "console-" + tag + "-", schedules, "the console node's schedules");
  log("node with the console on at 127.0.0.1:" + std::to_string(node.port));
  poller client(node.port);
  handover_pair pair(config, "console-bench-handover-" + tag);
  auto cycle = [&] {
    if (!lock.try_lock_for(10s)) throw std::runtime_error("lock took over 10 s");
    lock.unlock();
  };
  // Warm-up and calibration, polling off.
  long n = 0;
  const auto warm_started = mono_ns();
  while (mono_ns() - warm_started < static_cast<long long>(block_seconds * 1e9) || n < 5) {
    cycle();
    ++n;
  }
  const double per_cycle_s =
      static_cast<double>(mono_ns() - warm_started) / 1e9 / static_cast<double>(n);
  const long per_block = std::max(5L, static_cast<long>(block_seconds / per_cycle_s));
  pair.once();

  std::vector<double> lock_with, lock_without, hand_with, hand_without;
  std::mt19937_64 rng{std::random_device{}()};
  // Releases at a random point of the waiter's poll period, as in the handover benchmark, so
  // that the samples spread over it the same way with and without the client.
  std::uniform_int_distribution<long long> pause_ms(20, 20 + pair.poll_ms() - 1);
  auto block = [&](bool polling) {
    client.set(polling);
    std::this_thread::sleep_for(2 * poll_period);  // the client's first requests are under way
    const auto started = mono_ns();
    for (long i = 0; i < per_block; ++i) cycle();
    (polling ? lock_with : lock_without)
        .push_back(static_cast<double>(mono_ns() - started) / 1e3 / static_cast<double>(per_block));
    for (int i = 0; i < handovers_per_block; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds{pause_ms(rng)});
      (polling ? hand_with : hand_without).push_back(pair.once());
    }
  };
  for (int i = 0; i < pairs; ++i) {
    block(i % 2 == 0);
    block(i % 2 != 0);
    log(type + ": pair " + std::to_string(i + 1) + "/" + std::to_string(pairs));
  }
  client.set(false);
  const auto polls = summarize(client.latencies_ms());
  auto report = [&](const std::string& subject, const std::string& unit,
                    const std::vector<double>& with, const std::vector<double>& without) {
    const auto w = summarize(with);
    const auto wo = summarize(without);
    const double ratio = wo.median > 0 ? w.median / wo.median : 0;
    const std::map<std::string, std::string> extra{
        {"ratio_with_without", fixed(ratio, 4)},
        {"polls", std::to_string(polls.samples)},
        {"poll_failures", std::to_string(client.failures())},
        {"poll_median_ms", fixed(polls.median, 2)},
        {"poll_p99_ms", fixed(polls.p99, 2)},
        {"poll_period_ms", std::to_string(poll_period.count())},
        {"definition", subject == "lock_unlock"
                           ? "mean lock+unlock cycle per block, with (baton) / without (floor) a "
                             "client polling GET /api/v1/schedules every 100 ms"
                           : "release -> the other contender's on_acquired, with (baton) / "
                             "without (floor) the polling client"}};
    emit("console_cost_" + subject, type, "baton", unit, w, extra);
    emit("console_cost_" + subject, type, "floor", unit, wo, extra);
    log(type + ": " + subject + " with polling " + fixed(w.median, 3) + " " + unit + ", without " +
        fixed(wo.median, 3) + " " + unit + ", ratio " + fixed(ratio, 4));
  };
  report("lock_unlock", "us", lock_with, lock_without);
  report("handover", "ms", hand_with, hand_without);
  log(type + ": " + std::to_string(polls.samples) + " polls, median " + fixed(polls.median, 2) +
      " ms, p99 " + fixed(polls.p99, 2) + " ms, " + std::to_string(client.failures()) + " failed");
  node.process->signal(SIGTERM);
  if (!node.process->wait_exit(60s)) throw std::runtime_error("the console node did not stop");
}

}  // namespace

int main() {
  ::setenv("BATON_BENCH_BACKENDS", "sqlite", 0);
  return run_backends("baton_console_bench", 4, 20, bench_sqlite);
}
