// baton_contender_child: one process contending for one mutex, driven by the handover and
// takeover benchmarks.
//
//   baton_contender_child --type T [--param k=v]... --mutex M
//                         [--ttl-ms N] [--transition-ms N] [--retry-ms N] [--poll-ms N]
//                         [--lapse-jitter-ms N]
//
// Starts from the backend's default_options(), changed by the flags given, and contends at once.
// Prints one line per event on stdout; the last field is CLOCK_MONOTONIC in ns (comparable
// between the processes of one host):
//   OPTIONS <ttl> <transition> <retry> <poll> <drift> <ns>  the options in use (ms)
//   READY <ns>                   contending
//   ACQUIRED <fence> <ns>        on_acquired
//   LOST <ns>                    on_released
//   WAITING <owner> <ns>         the first on_observed after a start that names another owner
//   RENEWED <ns>                 on_observed shows our own lease extended (lease backends)
//   RELEASING <ns>               command "release": just before stop()
//   RELEASED <ns>                ... once the release is done (RELEASE-TIMEOUT after 10 s)
//   STARTED <ns>                 command "start": just before contending again
//   STATS <requests> <ns>        command "stats": baton::backend_requests_sent() so far
// Commands on stdin, one per line: "release", "start", "stats", "quit". End of input is "quit".
// Exits 0 after quit, 2 on a setup error (message on stderr). BATON_BENCH_LOG_LEVEL=debug
// turns on the library's log, and a line per on_observed, on stderr.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <stdexcept>
#include <string>

#include "baton/backends/factory.hpp"
#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/stats.hpp"
#include "common.hpp"

using namespace std::chrono_literals;

namespace {

using baton::bench::mono_ns;

void say(const std::string& line) {
  // One write per line: lines from the io threads and the main thread never interleave.
  std::string out = line + " " + std::to_string(mono_ns()) + "\n";
  (void)!::write(STDOUT_FILENO, out.data(), out.size());
}

struct arguments {
  baton::backend_config backend;
  std::string mutex;
  std::chrono::milliseconds ttl{-1}, transition{-1}, retry{-1}, poll{-1}, lapse_jitter{-1};
};

arguments parse(int argc, char** argv) {
  arguments a;
  for (int i = 1; i < argc; ++i) {
    std::string key = argv[i];
    if (i + 1 >= argc) throw std::invalid_argument("missing value for " + key);
    std::string value = argv[++i];
    auto ms = [&] { return std::chrono::milliseconds{std::stoll(value)}; };
    if (key == "--type") {
      a.backend.type = value;
    } else if (key == "--param") {
      auto eq = value.find('=');
      if (eq == std::string::npos) throw std::invalid_argument("--param needs key=value");
      a.backend.params[value.substr(0, eq)] = value.substr(eq + 1);
    } else if (key == "--mutex") {
      a.mutex = value;
    } else if (key == "--ttl-ms") {
      a.ttl = ms();
    } else if (key == "--transition-ms") {
      a.transition = ms();
    } else if (key == "--retry-ms") {
      a.retry = ms();
    } else if (key == "--poll-ms") {
      a.poll = ms();
    } else if (key == "--lapse-jitter-ms") {
      a.lapse_jitter = ms();
    } else {
      throw std::invalid_argument("unknown argument " + key);
    }
  }
  if (a.backend.type.empty() || a.mutex.empty())
    throw std::invalid_argument("usage: baton_contender_child --type T [--param k=v]... --mutex M");
  return a;
}

// Reports the contender's events. Callbacks run serialized on the service's strand; `waiting_`
// is also reset from the main thread before a start.
class reporter final : public baton::mutex_contender {
 public:
  void set_self(std::string id) { self_ = std::move(id); }
  /// Also print every observation on stderr (with BATON_BENCH_LOG_LEVEL).
  void set_verbose(bool on) { verbose_ = on; }
  void rearm() { waiting_reported_ = false; }

  void on_acquired(const baton::mutex_state& s) override {
    last_ttl_at_ = {};
    say("ACQUIRED " + std::to_string(s.after.fence));
  }
  void on_released(const baton::mutex_state&) override { say("LOST"); }
  void on_observed(const baton::mutex_owner& current) override {
    if (verbose_)
      std::cerr << "baton_contender_child " << ::getpid() << ": observed owner '"
                << current.owner_id << "' fence " << current.fence << " transition_at "
                << current.transition_at.time_since_epoch().count() << " at " << mono_ns() << "\n";
    if (current.is(self_)) {
      if (last_ttl_at_ != baton::backend_time{} && current.ttl_at != last_ttl_at_) say("RENEWED");
      last_ttl_at_ = current.ttl_at;
    } else if (!current.empty() && !waiting_reported_.exchange(true)) {
      say("WAITING " + current.owner_id);
    }
  }
  void on_error(std::error_code ec) override {
    std::cerr << "baton_contender_child " << ::getpid()
              << ": contend round failed: " << ec.message() << "\n";
  }

 private:
  std::string self_;
  bool verbose_ = false;
  std::atomic<bool> waiting_reported_{false};
  baton::backend_time last_ttl_at_{};  // strand only
};

int run(const arguments& a) {
  // BATON_BENCH_LOG_LEVEL=debug (trace, info, ...) shows the library's own log on stderr.
  const char* level = std::getenv("BATON_BENCH_LOG_LEVEL");
  if (level && *level) baton::detail::log().set_level(spdlog::level::from_str(level));
  // BATON_BENCH_IO_THREADS=N sizes the runtime's io pool (default: the library's default).
  baton::runtime::options threads;
  if (const char* n = std::getenv("BATON_BENCH_IO_THREADS"); n && *n)
    threads.io_threads = static_cast<unsigned>(std::stoul(n));
  baton::runtime rt(threads);
  auto backend = baton::make_backend(a.backend, rt);
  auto options = backend->default_options();
  if (a.ttl.count() >= 0) options.ttl = a.ttl;
  if (a.transition.count() >= 0) options.transition = a.transition;
  if (a.retry.count() >= 0) options.retry_period = a.retry;
  if (a.poll.count() >= 0) options.poll_interval = a.poll;
  if (a.lapse_jitter.count() >= 0) options.lapse_jitter = a.lapse_jitter;
  if (options.max_backoff < options.retry_period) options.max_backoff = options.retry_period;
  baton::validate(options);

  auto who = std::make_shared<reporter>();
  auto service = backend->make_contend_service(a.mutex, who, options);
  who->set_self(service->contender_id());
  who->set_verbose(level && *level);
  say("OPTIONS " + std::to_string(options.ttl.count()) + " " +
      std::to_string(options.transition.count()) + " " +
      std::to_string(options.retry_period.count()) + " " +
      std::to_string(options.poll_interval.count()) + " " +
      std::to_string(options.effective_drift_margin().count()));
  service->start();
  say("READY");

  for (std::string line; std::getline(std::cin, line);) {
    if (line == "release") {
      say("RELEASING");
      say(service->stop_and_wait(10s) ? "RELEASED" : "RELEASE-TIMEOUT");
    } else if (line == "start") {
      // Before start(): the first observation may come (from an io thread) before start()
      // returns, and readers expect STARTED first.
      who->rearm();
      say("STARTED");
      if (!service->start()) {
        std::cerr << "baton_contender_child: start refused (service not stopped)\n";
        return 1;
      }
    } else if (line == "stats") {
      say("STATS " + std::to_string(baton::backend_requests_sent()));
    } else if (line == "quit") {
      break;
    } else {
      std::cerr << "baton_contender_child: unknown command '" << line << "'\n";
      return 2;
    }
  }
  const bool released = service->stop_and_wait(10s);
  rt.stop();
  return released ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return run(parse(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "baton_contender_child: " << e.what() << "\n";
    return 2;
  }
}
