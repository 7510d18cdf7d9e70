// baton_throughput_bench: figure 3, locker throughput per backend.
//
// Uncontended: one thread, one baton::locker on one mutex, lock() + unlock() back to back, in
// batches of about batch_seconds each; the floor (floors.hpp: the same requests sent by hand,
// synchronously, with the same client library) runs its batches interleaved with baton's, so
// both see the same server state. Records "throughput_uncontended" (cycles/s: median and p99 of
// the per-batch rates; per-cycle latency in microseconds and the ratio to the floor as extras).
//
// Contended: `processes` children (baton_throughput_child) loop lock -> tiny critical section ->
// unlock on one mutex for a fixed time. From their CLOCK_MONOTONIC timestamps: handoffs (changes
// of owner) per second and the wait from one owner's unlock to the next owner's lock. Records
// "throughput_contended" (handoffs/s over one-second windows; wait median/p99 in ms as extras).
//
// Environment: as bench/run.sh exports it; BATON_BENCH_QUICK=1 for fewer samples,
// BATON_BENCH_BACKENDS to pick backends. Only JSON records go to stdout. For profiling:
// BATON_BENCH_TP_ONLY=baton|floor runs only that side of the uncontended figure (no records, no
// contended part; a summary on stderr), BATON_BENCH_IO_THREADS=N sizes the uncontended runtime's
// io pool (default: baton::runtime's own; recorded as "io_threads" when set).
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "baton/backends/factory.hpp"
#include "baton/mutex/locker.hpp"
#include "common.hpp"
#include "floors.hpp"

namespace {

using namespace baton::bench;
using namespace std::chrono_literals;

struct plan {
  bool quick = false;
  int batches = 25;
  double batch_seconds = 0.5;
  double contended_seconds = 10;
  int processes = 8;
};

plan make_plan() {
  plan p;
  const char* quick = std::getenv("BATON_BENCH_QUICK");
  p.quick = quick && std::string(quick) == "1";
  if (p.quick) {
    p.batches = 5;
    p.batch_seconds = 0.3;
    p.contended_seconds = 3;
  }
  return p;
}

void log(const std::string& line) { std::cerr << "baton_throughput_bench: " << line << std::endl; }

// Milliseconds from now until CLOCK_MONOTONIC reaches `deadline_ns` (0 once it has).
std::chrono::milliseconds ms_until(long long deadline_ns) {
  return std::chrono::milliseconds{std::max(0LL, (deadline_ns - mono_ns()) / 1'000'000)};
}

std::string scratch_dir() {
  if (const char* dir = std::getenv("BATON_TEST_TMPDIR"); dir && *dir) return dir;
  throw std::runtime_error("environment variable BATON_TEST_TMPDIR is not set");
}

// ---- uncontended ----------------------------------------------------------------------------

struct samples {
  std::vector<double> rates;         // cycles/s, one per batch
  std::vector<double> latencies_us;  // one per cycle
  long cycles_per_batch = 0;
};

// Cycles that take about `seconds` (at least 5), measured after a warm-up of the same length.
long calibrate(const std::function<void()>& cycle, double seconds) {
  const auto warm_until = mono_ns() + static_cast<std::int64_t>(seconds * 1e9);
  long n = 0;
  auto started = mono_ns();
  while (mono_ns() < warm_until || n < 5) {
    cycle();
    ++n;
  }
  const double per_cycle = static_cast<double>(mono_ns() - started) / 1e9 / static_cast<double>(n);
  return std::max(5L, std::lround(seconds / per_cycle));
}

// One batch of s.cycles_per_batch cycles, cut short at `limit_s` (a slowed-down server must not
// stretch the run); the rate counts the cycles done.
void run_batch(const std::function<void()>& cycle, samples& s, double limit_s) {
  const auto started = mono_ns();
  const auto cutoff = started + static_cast<std::int64_t>(limit_s * 1e9);
  auto last = started;
  long done = 0;
  while (done < s.cycles_per_batch && last < cutoff) {
    cycle();
    const auto now = mono_ns();
    s.latencies_us.push_back(static_cast<double>(now - last) / 1e3);
    last = now;
    ++done;
  }
  s.rates.push_back(static_cast<double>(done) / (static_cast<double>(last - started) / 1e9));
}

void uncontended(const std::string& type, const plan& p) {
  baton::runtime::options threads;
  if (const char* n = std::getenv("BATON_BENCH_IO_THREADS"); n && *n)
    threads.io_threads = static_cast<unsigned>(std::stoul(n));
  baton::runtime rt(threads);
  auto backend = baton::make_backend(backend_config_for(type), rt);
  const std::string name = "tp-solo-" + std::to_string(::getpid());
  baton::locker lock(*backend, name, backend->default_options());
  std::vector<double> lock_us, unlock_us;  // the two halves of baton's cycles
  std::function<void()> baton_cycle = [&] {
    const auto t0 = mono_ns();
    if (!lock.try_lock_for(10s))
      throw std::runtime_error(type + ": baton lock of an uncontended mutex took over 10 s");
    const auto t1 = mono_ns();
    lock.unlock();
    const auto t2 = mono_ns();
    lock_us.push_back(static_cast<double>(t1 - t0) / 1e3);
    unlock_us.push_back(static_cast<double>(t2 - t1) / 1e3);
  };
  auto floor = make_floor_lock(type, name);
  std::function<void()> floor_cycle = [&] { floor->cycle(); };

  const double limit = 3 * p.batch_seconds;

  // For profiling one side alone: BATON_BENCH_TP_ONLY=baton or floor (the other is skipped).
  if (const char* only = std::getenv("BATON_BENCH_TP_ONLY"); only && *only) {
    auto& cycle = std::string(only) == "floor" ? floor_cycle : baton_cycle;
    samples s;
    s.cycles_per_batch = calibrate(cycle, p.batch_seconds);
    for (int i = 0; i < p.batches; ++i) run_batch(cycle, s, limit);
    const auto r = summarize(s.rates), l = summarize(s.latencies_us);
    log(type + ": only " + only + ": " + fixed(r.median, 0) + " cycles/s, latency median " +
        fixed(l.median, 1) + " us, p99 " + fixed(l.p99, 1) + " us; lock median " +
        fixed(summarize(lock_us).median, 1) + " us, unlock median " +
        fixed(summarize(unlock_us).median, 1) + " us");
    return;
  }

  samples b, f;
  b.cycles_per_batch = calibrate(baton_cycle, p.batch_seconds);
  f.cycles_per_batch = calibrate(floor_cycle, p.batch_seconds);
  lock_us.clear();
  unlock_us.clear();
  log(type + ": uncontended, " + std::to_string(p.batches) + " batches each of " +
      std::to_string(b.cycles_per_batch) + " baton / " + std::to_string(f.cycles_per_batch) +
      " floor cycles, interleaved");
  for (int i = 0; i < p.batches; ++i) {
    // Alternate who goes first, so neither always follows the other.
    if (i % 2 == 0) {
      run_batch(baton_cycle, b, limit);
      run_batch(floor_cycle, f, limit);
    } else {
      run_batch(floor_cycle, f, limit);
      run_batch(baton_cycle, b, limit);
    }
  }

  const auto br = summarize(b.rates), fr = summarize(f.rates);
  const auto bl = summarize(b.latencies_us), fl = summarize(f.latencies_us);
  const double ratio = fr.median > 0 ? br.median / fr.median : 0;
  auto extra = [&](const summary& lat, const samples& s) {
    return std::map<std::string, std::string>{
        {"latency_median_us", fixed(lat.median, 1)},
        {"latency_p99_us", fixed(lat.p99, 1)},
        {"latency_samples", std::to_string(lat.samples)},
        {"batches", std::to_string(s.rates.size())},
        {"cycles_per_batch", std::to_string(s.cycles_per_batch)},
    };
  };
  auto be = extra(bl, b);
  be["ratio_to_floor"] = fixed(ratio, 3);
  const auto ll = summarize(lock_us), ul = summarize(unlock_us);
  be["lock_median_us"] = fixed(ll.median, 1);
  be["lock_p99_us"] = fixed(ll.p99, 1);
  be["unlock_median_us"] = fixed(ul.median, 1);
  be["unlock_p99_us"] = fixed(ul.p99, 1);
  be["options"] = "default_options()";
  if (std::getenv("BATON_BENCH_IO_THREADS")) be["io_threads"] = std::to_string(threads.io_threads);
  auto fe = extra(fl, f);
  fe["requests"] = floor->requests();
  emit("throughput_uncontended", type, "baton", "cycles/s", br, be);
  emit("throughput_uncontended", type, "floor", "cycles/s", fr, fe);
  log(type + ": baton " + fixed(br.median, 0) + " cycles/s (latency median " + fixed(bl.median, 1) +
      " us, p99 " + fixed(bl.p99, 1) + " us); floor " + fixed(fr.median, 0) + " cycles/s (median " +
      fixed(fl.median, 1) + " us, p99 " + fixed(fl.p99, 1) + " us); ratio " + fixed(ratio, 3) +
      (ratio < 0.8 ? " (below the 0.8 target)" : ""));
}

// ---- contended ------------------------------------------------------------------------------

struct section {
  int process;
  std::uint64_t fence;
  std::int64_t locked_ns, unlocking_ns;
};

void contended(const std::string& type, const plan& p) {
  const auto config = backend_config_for(type);
  const std::string name = "tp-shared-" + std::to_string(::getpid());
  const std::string dir = scratch_dir();
  std::vector<std::string> argv{bench_bin_dir() + "/baton_throughput_child", "--type", type};
  for (const auto& [k, v] : config.params) {
    argv.push_back("--param");
    argv.push_back(k + "=" + v);
  }
  argv.push_back("--mutex");
  argv.push_back(name);

  std::vector<std::string> outs;
  std::vector<std::unique_ptr<child_process>> procs;
  for (int i = 0; i < p.processes; ++i) {
    outs.push_back(dir + "/throughput-" + type + "-" + std::to_string(i) + ".txt");
    std::filesystem::remove(outs.back());
    auto args = argv;
    args.push_back("--out");
    args.push_back(outs.back());
    procs.push_back(std::make_unique<child_process>(args, bench_child_options));
  }
  const auto ready_by = mono_ns() + 30'000'000'000LL;
  for (auto& c : procs) {
    auto l = c->wait_line("", ms_until(ready_by));
    if (!l || *l != "READY")
      throw std::runtime_error(type + ": child " + std::to_string(c->pid()) +
                               " did not get ready within 30 s" +
                               (l ? " (said '" + *l + "')" : " (see its stderr above)"));
  }
  const auto duration_ns = static_cast<std::int64_t>(p.contended_seconds * 1e9);
  const auto start_ns = mono_ns();
  const auto end_ns = start_ns + duration_ns;
  for (auto& c : procs)
    if (!c->send("GO " + std::to_string(end_ns)))
      throw std::runtime_error("cannot write to child " + std::to_string(c->pid()));
  log(type + ": contended, " + std::to_string(p.processes) + " processes for " +
      fixed(p.contended_seconds, 0) + " s");

  // Unlock is bounded by min(lease, 10 s) in the locker; allow that and then some.
  const auto exit_by = end_ns + 30'000'000'000LL;
  for (auto& c : procs) {
    auto status = c->wait_exit(ms_until(exit_by));
    if (!status)
      throw std::runtime_error(type + ": child " + std::to_string(c->pid()) +
                               " did not finish within 30 s of the end");
    if (*status != 0)
      throw std::runtime_error(type + ": child " + std::to_string(c->pid()) + " failed (status " +
                               std::to_string(*status) + ")");
  }

  std::vector<section> all;
  std::vector<long> per_process(p.processes, 0);
  for (int i = 0; i < p.processes; ++i) {
    std::ifstream in(outs[i]);
    if (!in) throw std::runtime_error(type + ": missing child output " + outs[i]);
    section s{i, 0, 0, 0};
    while (in >> s.fence >> s.locked_ns >> s.unlocking_ns) {
      all.push_back(s);
      ++per_process[i];
    }
    std::filesystem::remove(outs[i]);
  }
  std::sort(all.begin(), all.end(),
            [](const section& a, const section& b) { return a.locked_ns < b.locked_ns; });

  // Handoffs: consecutive sections of different processes. Per one-second window, by the
  // time the new owner got the lock.
  const auto windows = std::max<std::int64_t>(1, duration_ns / 1'000'000'000);
  std::vector<double> per_window(static_cast<std::size_t>(windows), 0);
  std::vector<double> waits_ms;
  long handoffs = 0, overlaps = 0;
  for (std::size_t i = 1; i < all.size(); ++i) {
    if (all[i].locked_ns < all[i - 1].unlocking_ns) ++overlaps;
    if (all[i].process == all[i - 1].process) continue;
    ++handoffs;
    waits_ms.push_back(static_cast<double>(all[i].locked_ns - all[i - 1].unlocking_ns) / 1e6);
    const auto w = (all[i].locked_ns - start_ns) / 1'000'000'000;
    if (w >= 0 && w < windows) per_window[static_cast<std::size_t>(w)] += 1;
  }
  const auto rate = summarize(per_window);
  const auto wait = summarize(waits_ms);
  const double seconds = static_cast<double>(duration_ns) / 1e9;
  const auto fewest = *std::min_element(per_process.begin(), per_process.end());
  const auto most = *std::max_element(per_process.begin(), per_process.end());
  emit("throughput_contended", type, "baton", "handoffs/s", rate,
       {{"processes", std::to_string(p.processes)},
        {"duration_s", fixed(seconds, 1)},
        {"handoffs", std::to_string(handoffs)},
        {"handoffs_per_s_overall", fixed(static_cast<double>(handoffs) / seconds, 1)},
        {"sections", std::to_string(all.size())},
        {"sections_per_s", fixed(static_cast<double>(all.size()) / seconds, 1)},
        {"sections_per_process_min", std::to_string(fewest)},
        {"sections_per_process_max", std::to_string(most)},
        {"wait_median_ms", fixed(wait.median, 2)},
        {"wait_p99_ms", fixed(wait.p99, 2)},
        {"wait_samples", std::to_string(wait.samples)},
        {"overlaps", std::to_string(overlaps)},
        {"options", "default_options()"}});
  log(type + ": " + std::to_string(handoffs) + " handoffs in " + fixed(seconds, 1) + " s (" +
      fixed(static_cast<double>(handoffs) / seconds, 1) + "/s), " + std::to_string(all.size()) +
      " sections (per process " + std::to_string(fewest) + ".." + std::to_string(most) +
      "); wait median " + fixed(wait.median, 2) + " ms, p99 " + fixed(wait.p99, 2) + " ms" +
      (overlaps ? "; " + std::to_string(overlaps) + " OVERLAPPING sections" : ""));
  if (overlaps != 0)
    throw std::runtime_error(type + ": " + std::to_string(overlaps) +
                             " critical sections overlapped (mutual exclusion broken)");
}

}  // namespace

int main() {
  ::signal(SIGPIPE, SIG_IGN);
  const auto p = make_plan();
  // Everything has its own deadline; this one catches what would slip through them all.
  const auto limit = std::chrono::seconds{p.quick ? 300 : 900};
  std::thread([limit] {
    std::this_thread::sleep_for(limit);
    std::cerr << "baton_throughput_bench: FAILED: still running after " << limit.count()
              << " s; giving up" << std::endl;
    std::_Exit(3);  // the children die with us (PR_SET_PDEATHSIG)
  }).detach();

  int failed = 0;
  for (const auto& type : backends_to_run()) {
    const auto started = mono_ns();
    try {
      uncontended(type, p);
      if (!std::getenv("BATON_BENCH_TP_ONLY")) contended(type, p);
    } catch (const std::exception& e) {
      std::cerr << "baton_throughput_bench: FAILED on " << type << ": " << e.what() << std::endl;
      ++failed;
    }
    log(type + ": took " + fixed(static_cast<double>(mono_ns() - started) / 1e9, 1) + " s");
  }
  return failed == 0 ? 0 : 1;
}
