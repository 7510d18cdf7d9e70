// baton_takeover_bench: figure 2, crash takeover. Two processes (bench/contender_child.cpp)
// contend for one mutex; the owner is killed with SIGKILL at a random point of its lease and the
// time until the other process's on_acquired is one sample. A fresh process then becomes the
// next waiter.
//
// Options: ttl 1 s, transition 1 s (a 2 s lease), retry 100 ms, poll_interval 100 ms; ZooKeeper
// sessions of 2 s (backend_from_env). The kill comes at a uniformly random time in
// [ttl + 100 ms, 2 ttl + 100 ms) after the owner's on_acquired: after its first renewal (at ttl),
// at a uniformly random phase of its renewal period.
//
// The configured bound (extra "bound_ms"):
//   lease backends  ttl + transition (the lease a renewal grants, which the dead owner's last
//                   renewal started) + poll_interval (the waiter notices the end at its next
//                   poll) + the drift margin (max(50 ms, 2% of the lease))
//   zookeeper       the session timeout (the server deletes the dead session's lock node then;
//                   it checks expiry in tickTime buckets, so up to one tick more)
//
// Then, on the lease backends, the same with 8 waiters and lapse_jitter 0, 100 (the default) and
// 1000 ms (figure "takeover_jitter"): the first waiter to acquire counts.
//
// Samples per backend and series: 10 (BATON_BENCH_QUICK=1: 3). Output: JSON records on stdout
// (figure "takeover", subject "baton"); progress and errors on stderr. Exits 1 if any backend
// failed.
#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "common.hpp"

using namespace std::chrono_literals;

namespace {

using baton::bench::child_process;
using baton::bench::expect_line;
using baton::bench::last_field;
using baton::bench::mono_ns;

constexpr long long ttl_ms = 1000, transition_ms = 1000, retry_ms = 100, poll_ms = 100;
constexpr long long zookeeper_session_ms = 2000;  // bench/common.cpp: session_timeout 2s
constexpr long long zookeeper_tick_ms = 500;      // scripts/servers.sh: tickTime=500

std::string fmt(double v) {
  std::ostringstream o;
  o.precision(4);
  o << v;
  return o.str();
}

struct takeover_result {
  std::vector<double> samples;  // ms
  long long drift_ms = 0;
  std::size_t min_renewals = SIZE_MAX;  // RENEWED lines of the killed owner before the kill
  double max_kill_offset_ms = 0, min_kill_offset_ms = 1e18;
};

// Starts a contender and waits until it has seen the current owner (it waits in line).
std::unique_ptr<child_process> start_waiter(const std::vector<std::string>& argv) {
  auto c = std::make_unique<child_process>(argv, baton::bench::bench_child_options);
  if (expect_line(*c, {"WAITING", "ACQUIRED"}, 30s, "first observation").rfind("ACQ", 0) == 0)
    throw std::runtime_error("a new contender acquired the mutex while another one holds it");
  return c;
}

// `waiters` processes wait in line; the first to acquire after the kill counts, the others keep
// waiting. `lapse_jitter_ms` < 0: the library's default.
takeover_result run_baton(const std::string& type, int samples, long long bound_ms, int waiters = 1,
                          long long lapse_jitter_ms = -1) {
  const auto config = baton::bench::backend_config_for(type);
  const std::string mutex = "bench-takeover-" + std::to_string(::getpid()) + "-" +
                            std::to_string(waiters) + "-" + std::to_string(lapse_jitter_ms);
  std::vector<std::string> flags{
      "--ttl-ms",   std::to_string(ttl_ms),   "--transition-ms", std::to_string(transition_ms),
      "--retry-ms", std::to_string(retry_ms), "--poll-ms",       std::to_string(poll_ms)};
  if (lapse_jitter_ms >= 0) {
    flags.push_back("--lapse-jitter-ms");
    flags.push_back(std::to_string(lapse_jitter_ms));
  }
  const auto argv = baton::bench::contender_argv(config, mutex, flags);
  takeover_result result;

  auto owner = std::make_unique<child_process>(argv, baton::bench::bench_child_options);
  const auto options = expect_line(*owner, {"OPTIONS"}, 30s, "OPTIONS line");
  result.drift_ms = std::stoll(baton::bench::field(options, 5));
  long long acquired_ns = last_field(expect_line(*owner, {"ACQUIRED"}, 30s, "first acquisition"));
  std::vector<std::unique_ptr<child_process>> line;
  for (int w = 0; w < waiters; ++w) line.push_back(start_waiter(argv));

  std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<long long> kill_offset_ms(ttl_ms + 100, 2 * ttl_ms + 100 - 1);
  const auto takeover_timeout = std::chrono::milliseconds{bound_ms} + 10s;

  for (int i = 0; i < samples; ++i) {
    const long long offset = kill_offset_ms(rng);
    const long long kill_at = acquired_ns + offset * 1'000'000;
    if (mono_ns() > kill_at)
      std::cerr << "takeover " << type << ": the next waiter was ready only "
                << (mono_ns() - acquired_ns) / 1'000'000 << " ms after the acquisition (wanted a "
                << offset << " ms kill)\n";
    baton::bench::sleep_until_ns(kill_at);
    owner->drain();
    result.min_renewals = std::min(result.min_renewals, owner->count_lines("RENEWED"));
    if (owner->count_lines("LOST") != 0)
      throw std::runtime_error("the owner " + owner->describe() +
                               " lost the mutex before the kill");
    const long long killed = mono_ns();
    owner->signal(SIGKILL);
    const double offset_ms = static_cast<double>(killed - acquired_ns) / 1e6;
    result.min_kill_offset_ms = std::min(result.min_kill_offset_ms, offset_ms);
    result.max_kill_offset_ms = std::max(result.max_kill_offset_ms, offset_ms);

    // The first waiter to acquire (each reports its own CLOCK_MONOTONIC, so the order in which
    // they are polled here does not matter). Bounded by takeover_timeout.
    std::size_t next = line.size();
    const long long give_up = mono_ns() + std::chrono::nanoseconds{takeover_timeout}.count();
    while (next == line.size()) {
      for (std::size_t w = 0; w < line.size() && next == line.size(); ++w)
        if (line[w]->drain(); auto got = line[w]->wait_line("ACQUIRED", 0ms)) {
          acquired_ns = last_field(*got);
          next = w;
        }
      if (next != line.size()) break;
      if (mono_ns() > give_up)
        throw std::runtime_error("no waiter acquired the mutex within " +
                                 std::to_string(takeover_timeout.count()) +
                                 " ms after the owner was killed");
      std::this_thread::sleep_for(1ms);
    }
    const double took = static_cast<double>(acquired_ns - killed) / 1e6;
    result.samples.push_back(took);
    std::cerr << "takeover " << type << " (" << waiters << " waiter(s)): " << i + 1 << "/"
              << samples << ": " << fmt(took) << " ms (kill " << fmt(offset_ms)
              << " ms after acquisition)\n";
    if (!owner->wait_exit(10s))
      throw std::runtime_error("the killed owner " + owner->describe() + " did not exit");

    owner = std::move(line[next]);
    line.erase(line.begin() + static_cast<std::ptrdiff_t>(next));
    if (i + 1 < samples) line.push_back(start_waiter(argv));
  }
  for (auto& w : line) w->send("quit");
  for (auto& w : line) w->wait_exit(20s);

  owner->send("quit");
  auto status = owner->wait_exit(20s);
  if (!status) throw std::runtime_error("contender " + owner->describe() + " did not quit in 20 s");
  if (*status != 0)
    throw std::runtime_error("contender " + owner->describe() + " failed (see its messages above)");
  return result;
}

void run_backend(const std::string& type, int samples) {
  const bool zookeeper = type == "zookeeper";
  // The drift margin is max(50 ms, 2% of the lease); the child reports the one it used.
  const long long drift_ms = std::max(50LL, (ttl_ms + transition_ms) / 50);
  const long long bound_ms =
      zookeeper ? zookeeper_session_ms : ttl_ms + transition_ms + poll_ms + drift_ms;
  std::cerr << "takeover " << type << ": " << samples << " kills, bound " << bound_ms << " ms\n";
  auto result = run_baton(type, samples, bound_ms);
  if (!zookeeper && result.drift_ms != drift_ms)
    throw std::runtime_error("the contender used a drift margin of " +
                             std::to_string(result.drift_ms) + " ms, expected " +
                             std::to_string(drift_ms));
  const auto s = baton::bench::summarize(result.samples);
  std::map<std::string, std::string> extra{
      {"measured",
       "SIGKILL of the owner process -> the other process's on_acquired "
       "(CLOCK_MONOTONIC of both)"},
      {"ttl_ms", std::to_string(ttl_ms)},
      {"transition_ms", std::to_string(transition_ms)},
      {"retry_ms", std::to_string(retry_ms)},
      {"poll_interval_ms", std::to_string(poll_ms)},
      {"bound_ms", std::to_string(bound_ms)},
      {"kill", "uniform [ttl + 100, 2 ttl + 100) ms after the owner's on_acquired"},
      {"kill_offset_range_ms",
       fmt(result.min_kill_offset_ms) + ".." + fmt(result.max_kill_offset_ms)},
      {"above_bound", std::to_string(std::count_if(result.samples.begin(), result.samples.end(),
                                                   [&](double v) { return v > bound_ms; }))}};
  if (zookeeper) {
    extra["session_timeout_ms"] = std::to_string(zookeeper_session_ms);
    extra["tick_ms"] = std::to_string(zookeeper_tick_ms);
    extra["bound_with_tick_ms"] = std::to_string(zookeeper_session_ms + zookeeper_tick_ms);
    extra["bound"] =
        "session_timeout (requested; the server expires sessions in tickTime = 500 ms buckets, "
        "so a takeover may take up to one tick longer)";
  } else {
    extra["drift_margin_ms"] = std::to_string(drift_ms);
    extra["bound"] = "ttl + transition + poll_interval + drift_margin = " + std::to_string(ttl_ms) +
                     " + " + std::to_string(transition_ms) + " + " + std::to_string(poll_ms) +
                     " + " + std::to_string(drift_ms);
    extra["min_renewals_before_kill"] = std::to_string(result.min_renewals);
  }
  baton::bench::emit("takeover", type, "baton", "ms", s, extra);
  std::cerr << "takeover " << type << ": median " << fmt(s.median) << " ms, p99 " << fmt(s.p99)
            << " ms (bound " << bound_ms << " ms)\n";
  if (zookeeper) return;  // no lapse jitter: the session's end is pushed to every waiter

  // The lapse jitter with 8 waiters: what each window costs the takeover. 0 lets the 8 ask in
  // the same instant; the default is contend_options::lapse_jitter (100 ms).
  for (long long jitter : {0LL, 100LL, 1000LL}) {
    auto r = run_baton(type, samples, bound_ms, 8, jitter);
    const auto j = baton::bench::summarize(r.samples);
    auto more = extra;
    more["waiters"] = "8";
    more["lapse_jitter_ms"] = std::to_string(jitter);
    more["kill_offset_range_ms"] = fmt(r.min_kill_offset_ms) + ".." + fmt(r.max_kill_offset_ms);
    more["above_bound"] = std::to_string(
        std::count_if(r.samples.begin(), r.samples.end(), [&](double v) { return v > bound_ms; }));
    baton::bench::emit("takeover_jitter", type, "baton", "ms", j, more);
    std::cerr << "takeover " << type << " (8 waiters, lapse_jitter " << jitter << " ms): median "
              << fmt(j.median) << " ms, p99 " << fmt(j.p99) << " ms\n";
  }
}

}  // namespace

int main() { return baton::bench::run_backends("baton_takeover_bench", 3, 10, run_backend); }
