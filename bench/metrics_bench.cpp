// baton_metrics_bench: figure 7, what the metrics (mutex/metrics.hpp) cost on the lock path.
//
// One thread, one baton::locker on one uncontended mutex, lock() + unlock() back to back, in
// blocks of about block_seconds each, with metrics on and off (baton::set_metrics_enabled) in
// alternating blocks in the same run, so that both see the same server state and drift cancels:
// pair i runs on then off when i is even, off then on when odd. A sample is one block's mean
// cycle time in microseconds. Records "metrics_cost" with subject "baton" (metrics on) and
// "floor" (metrics off), the ratio on/off of the medians and the requests per cycle (the
// backend's request counter over the "on" blocks) as extras.
//
// Backends: "memory" (the in-process store: the hooks against almost nothing) and the five real
// ones, or the comma list in BATON_BENCH_BACKENDS. BATON_BENCH_QUICK=1 for fewer blocks. Only
// JSON records go to stdout. Before the backends: the cost of the hook alone ("metrics_hook").
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "baton/backends/factory.hpp"
#include "baton/mutex/locker.hpp"
#include "baton/mutex/metrics.hpp"
#include "common.hpp"

namespace {

using namespace baton::bench;
using namespace std::chrono_literals;

constexpr double block_seconds = 0.25;

void log(const std::string& line) { std::cerr << "baton_metrics_bench: " << line << std::endl; }

std::uint64_t requests_of(const std::string& type) {
  for (const auto& m : baton::backend_metrics_snapshot())
    if (m.type == type) return m.requests;
  return 0;
}

void bench_backend(const std::string& type, int pairs) {
  baton::runtime rt;
  auto backend = baton::make_backend(backend_config_for(type), rt);
  const std::string name = "bench-metrics-" + std::to_string(::getpid());
  baton::locker lock(*backend, name, backend->default_options());
  auto cycle = [&] {
    if (!lock.try_lock_for(10s))
      throw std::runtime_error(type + ": lock of an uncontended mutex took over 10 s");
    lock.unlock();
  };

  // Warm-up (connections, tables, scripts) and calibration with metrics on.
  baton::set_metrics_enabled(true);
  const auto warm_until = mono_ns() + static_cast<long long>(block_seconds * 1e9);
  long n = 0;
  const auto warm_started = mono_ns();
  while (mono_ns() < warm_until || n < 5) {
    cycle();
    ++n;
  }
  const double per_cycle_s =
      static_cast<double>(mono_ns() - warm_started) / 1e9 / static_cast<double>(n);
  const long per_block = std::max(5L, static_cast<long>(block_seconds / per_cycle_s));

  std::vector<double> on_us, off_us;
  std::uint64_t on_requests = 0;
  long on_cycles = 0;
  auto block = [&](bool on) {
    baton::set_metrics_enabled(on);
    const auto requests0 = requests_of(type);
    const auto started = mono_ns();
    for (long i = 0; i < per_block; ++i) cycle();
    const double us =
        static_cast<double>(mono_ns() - started) / 1e3 / static_cast<double>(per_block);
    if (on) {
      on_us.push_back(us);
      on_requests += requests_of(type) - requests0;
      on_cycles += per_block;
    } else {
      off_us.push_back(us);
    }
  };
  for (int i = 0; i < pairs; ++i) {
    const bool on_first = i % 2 == 0;
    block(on_first);
    block(!on_first);
  }
  baton::set_metrics_enabled(true);

  const auto on = summarize(on_us);
  const auto off = summarize(off_us);
  const double ratio = off.median > 0 ? on.median / off.median : 0;
  const double requests_per_cycle =
      on_cycles > 0 ? static_cast<double>(on_requests) / static_cast<double>(on_cycles) : 0;
  const std::map<std::string, std::string> extra{
      {"cycles_per_block", std::to_string(per_block)},
      {"blocks", std::to_string(pairs)},
      {"ratio_on_off", fixed(ratio, 4)},
      {"requests_per_cycle", fixed(requests_per_cycle, 2)},
      {"definition", "mean lock+unlock cycle per block, metrics on (baton) / off (floor)"}};
  emit("metrics_cost", type, "baton", "us", on, extra);
  emit("metrics_cost", type, "floor", "us", off, extra);
  log(type + ": on " + fixed(on.median, 3) + " us, off " + fixed(off.median, 3) + " us, ratio " +
      fixed(ratio, 4) + " (" + std::to_string(pairs) + " pairs of " + std::to_string(per_block) +
      " cycles, " + fixed(requests_per_cycle, 2) + " requests/cycle)");
}

// The hook alone: one request timed as the backends time it (two steady_clock reads) and
// recorded, under "other" (the last type the lookup compares: an upper bound), on and off in
// alternating blocks. Records "metrics_hook" (ns per request; backend "hook").
void bench_hook(int pairs) {
  constexpr long calls = 1'000'000;
  std::vector<double> on_ns, off_ns;
  auto block = [&](bool on) {
    baton::set_metrics_enabled(on);
    const auto started = mono_ns();
    for (long i = 0; i < calls; ++i) {
      const auto sent = std::chrono::steady_clock::now();
      baton::detail::record_backend_request("other", std::chrono::steady_clock::now() - sent);
    }
    (on ? on_ns : off_ns)
        .push_back(static_cast<double>(mono_ns() - started) / static_cast<double>(calls));
  };
  for (int i = 0; i < pairs; ++i) {
    block(i % 2 == 0);
    block(i % 2 != 0);
  }
  baton::set_metrics_enabled(true);
  const auto on = summarize(on_ns);
  const auto off = summarize(off_ns);
  const std::map<std::string, std::string> extra{
      {"calls_per_block", std::to_string(calls)},
      {"definition",
       "two steady_clock reads + record_backend_request, metrics on (baton) / off (floor)"}};
  emit("metrics_hook", "hook", "baton", "ns", on, extra);
  emit("metrics_hook", "hook", "floor", "ns", off, extra);
  log("hook: on " + fixed(on.median, 1) + " ns, off " + fixed(off.median, 1) +
      " ns per request (two clock reads included)");
}

}  // namespace

int main() {
  const char* only = std::getenv("BATON_BENCH_BACKENDS");
  int failures = 0;
  const char* quick = std::getenv("BATON_BENCH_QUICK");
  const int memory_pairs = quick && std::string(quick) == "1" ? 5 : 20;
  if (!only || !*only) {  // memory is not in the default list of the other benchmarks
    bench_hook(memory_pairs);
    try {
      bench_backend("memory", memory_pairs);
    } catch (const std::exception& e) {
      std::cerr << "baton_metrics_bench: memory: FAILED: " << e.what() << "\n";
      ++failures;
    }
  }
  failures += run_backends("baton_metrics_bench", 5, 20, bench_backend);
  return failures == 0 ? 0 : 1;
}
