#pragma once
// Shared by the benchmark programs: sample statistics, one JSON record per figure on stdout,
// process probes (threads, RSS, CPU), and the backend settings read from the environment that
// bench/run.sh exports (the same variables as the test servers: BATON_TEST_*).
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "baton/mutex/backend.hpp"

namespace baton::bench {

/// Median, p99, min, max of a sample set (any unit).
struct summary {
  std::size_t samples = 0;
  double median = 0, p99 = 0, min = 0, max = 0, mean = 0;
};
summary summarize(std::vector<double> values);

/// One result line: {"figure":..,"backend":..,"subject":..,"unit":..,"samples":..,"median":..,
/// "p99":..,"min":..,"max":..,"mean":.., <extra>...}. Printed to stdout as one JSON line.
/// `subject` is "baton", "floor" or a peer ("kazoo-lock", ...).
void emit(const std::string& figure, const std::string& backend, const std::string& subject,
          const std::string& unit, const summary& s,
          const std::map<std::string, std::string>& extra = {});
/// A single-value record (scale figures): samples = 1, median = p99 = value.
void emit_value(const std::string& figure, const std::string& backend, const std::string& subject,
                const std::string& unit, double value,
                const std::map<std::string, std::string>& extra = {});

/// CLOCK_MONOTONIC in nanoseconds (comparable across processes on one host).
std::int64_t mono_ns();

/// Backend settings for `type` from the BATON_TEST_* environment (throws when missing).
/// sqlite uses $BATON_TEST_TMPDIR/bench.db.
backend_config backend_from_env(const std::string& type);
/// "sqlite", "postgresql", "mysql", "redis", "zookeeper", or the comma list in
/// $BATON_BENCH_BACKENDS.
std::vector<std::string> backends_to_run();

/// A benchmark's main loop: ignores SIGPIPE (a dead child's stdin must give an error, not kill
/// the benchmark), then runs `run(backend, samples)` for every backend to run, with `samples`
/// = `quick_samples` when BATON_BENCH_QUICK=1, else `full_samples`. A backend that throws is
/// reported on stderr as "<program>: <backend>: FAILED: ..." and the others still run.
/// Returns the exit status: 0 when every backend succeeded, else 1.
int run_backends(const std::string& program, int quick_samples, int full_samples,
                 const std::function<void(const std::string&, int)>& run);

/// Threads of this process (from /proc/self/status), resident set in bytes, CPU seconds used.
struct process_usage {
  long threads = 0;
  long rss_bytes = 0;
  double cpu_seconds = 0;
};
process_usage usage_of(int pid);
process_usage self_usage();

}  // namespace baton::bench
