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
// 1000 ms (figure "takeover_jitter"): the first waiter to acquire counts. Two more figures per
// series show what a window costs and what it saves:
//   after lapse   the takeover minus the time from the kill to the dead lease's end (the owner's
//                 last RENEWED or ACQUIRED line + ttl + transition): the time the mutex stood free,
//                 without the random phase of the kill in the lease
//   requests      the backend requests the 8 waiters sent (baton::backend_requests_sent(), the
//                 children's "stats" command) from 20 ms before the lapse to 200 ms after the
//                 later of the takeover and the end of the jitter window, minus what they sent
//                 at their idle rate (measured from the kill to 20 ms before the lapse) over as
//                 long: the extra requests one takeover costs the server
//
// Samples per backend and series: 10, the lapse-jitter series 30 (BATON_BENCH_QUICK=1: 3;
// BATON_TAKEOVER_JITTER_SAMPLES overrides 30). Output: JSON records on stdout
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

bool zookeeper_type(const std::string& type) { return type == "zookeeper"; }

std::string fmt(double v) {
  std::ostringstream o;
  o.precision(4);
  o << v;
  return o.str();
}

struct takeover_result {
  std::vector<double> samples;      // ms
  std::vector<double> after_lapse;  // ms, takeover minus (lease end - kill)
  std::vector<double> requests;     // extra backend requests of the waiters per takeover
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

// The sum of the contenders' backend_requests_sent() (the "stats" command).
long long requests_of(std::vector<std::unique_ptr<child_process>>& line) {
  long long sum = 0;
  for (auto& c : line) {
    if (!c->send("stats")) throw std::runtime_error("contender " + c->describe() + " gone");
    // The next STATS line is the one just asked for: every earlier one was read already.
    auto got = c->wait_line("STATS", 10s);
    if (!got) throw std::runtime_error("no STATS from contender " + c->describe());
    sum += std::stoll(baton::bench::field(*got, 1));
  }
  return sum;
}

// The CLOCK_MONOTONIC of `c`'s last ACQUIRED or RENEWED line at or before `until_ns`: when the
// lease it holds was last granted or extended (the reply's arrival, within a round trip of the
// server's grant).
long long last_grant_ns(child_process& c, long long until_ns) {
  c.drain();
  long long last = 0;
  for (const auto& l : c.lines())
    if (l.rfind("ACQUIRED", 0) == 0 || l.rfind("RENEWED", 0) == 0) {
      const long long ns = last_field(l);
      if (ns <= until_ns) last = std::max(last, ns);
    }
  return last;
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
    baton::bench::sleep_until_ns(kill_at - 20'000'000);
    const long long requests_at_kill = requests_of(line);
    baton::bench::sleep_until_ns(kill_at);
    owner->drain();
    result.min_renewals = std::min(result.min_renewals, owner->count_lines("RENEWED"));
    if (owner->count_lines("LOST") != 0)
      throw std::runtime_error("the owner " + owner->describe() +
                               " lost the mutex before the kill");
    const long long killed = mono_ns();
    owner->signal(SIGKILL);
    // The dead lease ends ttl + transition after its last grant; the waiters' requests are
    // counted from 20 ms before.
    const long long lapse_ns =
        last_grant_ns(*owner, killed) + (ttl_ms + transition_ms) * 1'000'000LL;
    const bool count_requests = lapse_jitter_ms >= 0 && !zookeeper_type(type);
    long long requests_before_lapse = 0, before_lapse_ns = 0;
    if (count_requests) {
      baton::bench::sleep_until_ns(lapse_ns - 20'000'000);
      before_lapse_ns = mono_ns();
      requests_before_lapse = requests_of(line);
    }
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
    if (!zookeeper_type(type))
      result.after_lapse.push_back(static_cast<double>(acquired_ns - lapse_ns) / 1e6);
    if (count_requests) {
      const long long window_end =
          std::max(acquired_ns, lapse_ns + lapse_jitter_ms * 1'000'000LL) + 200'000'000LL;
      baton::bench::sleep_until_ns(window_end);
      const long long requests_after = requests_of(line);
      const double idle_rate = static_cast<double>(requests_before_lapse - requests_at_kill) /
                               static_cast<double>(std::max(1LL, before_lapse_ns - killed));
      const double window = static_cast<double>(mono_ns() - before_lapse_ns);
      result.requests.push_back(static_cast<double>(requests_after - requests_before_lapse) -
                                idle_rate * window);
    }
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
  if (!zookeeper) {
    const auto lapse = baton::bench::summarize(result.after_lapse);
    extra["after_lapse_median_ms"] = fmt(lapse.median);
    extra["after_lapse_p99_ms"] = fmt(lapse.p99);
  }
  baton::bench::emit("takeover", type, "baton", "ms", s, extra);
  std::cerr << "takeover " << type << ": median " << fmt(s.median) << " ms, p99 " << fmt(s.p99)
            << " ms (bound " << bound_ms << " ms)\n";
  if (zookeeper) return;  // no lapse jitter: the session's end is pushed to every waiter

  // The lapse jitter with 8 waiters: what each window costs the takeover. 0 lets the 8 ask in
  // the same instant; the default is contend_options::lapse_jitter (100 ms).
  const int jitter_samples = std::stoi(
      baton::bench::env_or("BATON_TAKEOVER_JITTER_SAMPLES",
                           baton::bench::env_or("BATON_BENCH_QUICK", "0") == "1" ? "3" : "30"));
  for (long long jitter : {0LL, 100LL, 1000LL}) {
    auto r = run_baton(type, jitter_samples, bound_ms, 8, jitter);
    const auto j = baton::bench::summarize(r.samples);
    const auto lapse = baton::bench::summarize(r.after_lapse);
    const auto requests = baton::bench::summarize(r.requests);
    auto more = extra;
    more["after_lapse_median_ms"] = fmt(lapse.median);
    more["after_lapse_p99_ms"] = fmt(lapse.p99);
    more["after_lapse_max_ms"] = fmt(lapse.max);
    more["requests_median"] = fmt(requests.median);
    more["requests_p99"] = fmt(requests.p99);
    more["waiters"] = "8";
    more["lapse_jitter_ms"] = std::to_string(jitter);
    more["kill_offset_range_ms"] = fmt(r.min_kill_offset_ms) + ".." + fmt(r.max_kill_offset_ms);
    more["above_bound"] = std::to_string(
        std::count_if(r.samples.begin(), r.samples.end(), [&](double v) { return v > bound_ms; }));
    baton::bench::emit("takeover_jitter", type, "baton", "ms", j, more);
    std::cerr << "takeover " << type << " (8 waiters, lapse_jitter " << jitter << " ms): median "
              << fmt(j.median) << " ms, p99 " << fmt(j.p99) << " ms; after the lapse median "
              << fmt(lapse.median) << " ms, p99 " << fmt(lapse.p99) << " ms; extra requests "
              << "median " << fmt(requests.median) << ", p99 " << fmt(requests.p99) << "\n";
  }
}

}  // namespace

int main() { return baton::bench::run_backends("baton_takeover_bench", 3, 10, run_backend); }
