#pragma once
// Shared by the benchmark programs: sample statistics, one JSON record per figure on stdout,
// process probes (threads, RSS, CPU) and the contender children's event lines. Child processes,
// the backend settings from the environment bench/run.sh exports (the same BATON_TEST_*
// variables as the test servers) and CLOCK_MONOTONIC come from the test support library
// (tests/support: baton::test::child_process, backend_config_for, mono_ns).
#include <chrono>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "baton/mutex/backend.hpp"
#include "support/env.hpp"
#include "support/process.hpp"

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

using test::backend_config_for;
using test::child_process;
using test::mono_ns;

/// How the benchmarks start their children: commands on stdin, own process group, killed when
/// the benchmark dies.
inline constexpr test::child_options bench_child_options{.pipe_stdin = true,
                                                         .own_process_group = true};

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

/// wait_line() that throws std::runtime_error naming `what`, the child and its state when the
/// line does not come within `timeout`.
std::string expect_line(child_process& child, std::initializer_list<std::string_view> prefixes,
                        std::chrono::milliseconds timeout, const std::string& what);

/// The command line of baton_contender_child (bench/contender_child.cpp) contending for `mutex`
/// on the backend `config`, followed by `flags`.
std::vector<std::string> contender_argv(const backend_config& config, const std::string& mutex,
                                        const std::vector<std::string>& flags = {});

/// The last whitespace-separated field of `line` as a number (the events' CLOCK_MONOTONIC ns).
long long last_field(const std::string& line);
/// The `index`-th whitespace-separated field of `line` (0 is the event name); empty if missing.
std::string field(const std::string& line, std::size_t index);

/// Sleeps until CLOCK_MONOTONIC reaches `ns` (returns at once if it has).
void sleep_until_ns(long long ns);

/// `v` with `digits` digits after the point ("0.9285" for fixed(0.92851, 4)).
std::string fixed(double v, int digits);

/// The environment variable `name`, or `fallback` when it is unset or empty.
std::string env_or(const char* name, const std::string& fallback);

/// Directory of the benchmark programs: $BATON_BENCH_BIN, else the directory of this program.
std::string bench_bin_dir();

/// Waits until mutexes `prefix`0 .. `prefix`(count - 1) all have an owner (read through
/// `backend`, 20 ms apart); returns the seconds it took. Throws std::runtime_error naming `what`
/// and the first mutex without one after `limit`.
double wait_owned(mutex_backend& backend, const std::string& prefix, long count,
                  const std::string& what, std::chrono::seconds limit = std::chrono::seconds{300});

}  // namespace baton::bench
