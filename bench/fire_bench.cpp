// baton_fire_bench: figure 9, the daemon with 10,000 schedules (issue 19).
//  (a) idle: `baton run` owning 10,000 cron schedules that do not fire during the window:
//      threads, resident memory, CPU.
//  (b) firing: 10,000 schedules `* * * * *` whose command (baton_fire_probe) appends one line
//      "schedule planned started" and exits, on one node. Over two fires after settle: runs
//      started per fire, start lateness (the command's own start time minus the planned fire
//      time) p50/p99/max, runs started within 1 s, duplicates, step-downs and lease losses (the
//      daemon's /metrics and its "local lease ran out" log lines), threads and resident memory
//      (highest sample), CPU of the daemon and of its reaped children; then SIGTERM at a quiet
//      moment: the time until the daemon exited and how many leases it left unreleased.
// Environment: as bench/run.sh sets it (BATON_TEST_*, BATON_BENCH_BIN, BATON_BENCH_DAEMON,
// BATON_BENCH_QUICK, BATON_BENCH_BACKENDS). BATON_FIRE_SCHEDULES overrides 10,000;
// BATON_FIRE_PARTS ("idle,firing") picks the parts; BATON_FIRE_FIRES the fires measured (2).
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <thread>

#include "baton/backends/factory.hpp"
#include "common.hpp"
#include "support/http_client.hpp"

namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
namespace bb = baton::bench;

using bb::env_or;

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

long long wall_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    fail("no free port");
  ::close(fd);
  return ntohs(addr.sin_port);
}

/// Children's CPU seconds (cutime + cstime: supervisors and commands the daemon reaped).
double children_cpu(int pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string content((std::istreambuf_iterator<char>(stat)), {});
  auto close = content.rfind(')');
  if (close == std::string::npos) return 0;
  std::istringstream rest(content.substr(close + 2));
  std::string field;
  long long c = 0;
  for (int i = 3; i <= 17 && rest >> field; ++i)
    if (i == 16 || i == 17) c += std::stoll(field);
  return static_cast<double>(c) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

/// The sum of every sample of metric `name` in a Prometheus text exposition.
double metric_sum(const std::string& text, const std::string& name) {
  double sum = 0;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(name, 0) != 0) continue;
    const char next = line.size() > name.size() ? line[name.size()] : '\0';
    if (next != ' ' && next != '{') continue;
    sum += std::stod(line.substr(line.rfind(' ') + 1));
  }
  return sum;
}

long count_lines(const std::string& file, const std::string& needle) {
  std::ifstream in(file);
  long n = 0;
  for (std::string line; std::getline(in, line);)
    if (line.find(needle) != std::string::npos) ++n;
  return n;
}

struct daemon_setup {
  std::string config_file;
  std::string log_file;
  std::string probe_file;
  std::string prefix;
  int http_port = 0;
};

daemon_setup write_config(const baton::backend_config& config, long schedules,
                          const std::string& cron, const std::string& tag) {
  const std::string& type = config.type;
  const std::string dir = env_or("BATON_TEST_TMPDIR", "/tmp");
  daemon_setup d;
  d.config_file = dir + "/fire-" + tag + "-" + type + ".json";
  d.log_file = dir + "/fire-" + tag + "-" + type + ".log";
  d.probe_file = dir + "/fire-" + tag + "-" + type + ".runs";
  d.prefix = "fire-" + tag + "-" + std::to_string(getpid()) + "-";
  d.http_port = free_port();
  ::unlink(d.probe_file.c_str());
  std::ofstream out(d.config_file);
  out << "{\n  \"backend\": {\"type\": \"" << type << "\"";
  for (const auto& [k, v] : config.params) out << ", \"" << k << "\": \"" << v << "\"";
  out << "},\n  \"log_level\": \"warn\",\n  \"http\": {\"listen\": \"127.0.0.1:" << d.http_port
      << "\"},\n  \"schedules\": [\n";
  const std::string probe = env_or("BATON_BENCH_BIN", ".") + "/baton_fire_probe";
  for (long i = 0; i < schedules; ++i)
    out << "    {\"name\": \"" << d.prefix << i << "\", \"cron\": \"" << cron
        << "\", \"command\": [\"" << probe << "\", \"" << d.probe_file << "\"]}"
        << (i + 1 < schedules ? ",\n" : "\n");
  out << "  ]\n}\n";
  return d;
}

bb::child_process start_daemon(const daemon_setup& d) {
  // exec: the child's pid is the daemon's; its log goes to a file.
  return bb::child_process({"/bin/sh", "-c", "exec \"$0\" run --config \"$1\" 2>\"$2\"",
                            env_or("BATON_BENCH_DAEMON", "baton"), d.config_file, d.log_file},
                           bb::bench_child_options);
}

/// Waits until the daemon owns every schedule; returns the seconds it took.
double wait_owned(baton::mutex_backend& backend, const daemon_setup& d, long schedules,
                  const std::string& type) {
  return bb::wait_owned(backend, d.prefix, schedules, type + ": the daemon's schedules");
}

/// SIGTERM, then the seconds until the daemon exited (-1: not within 60 s).
double stop_daemon(bb::child_process& daemon) {
  const auto t0 = steady::now();
  daemon.signal(SIGTERM);
  if (!daemon.wait_exit(60s)) return -1;
  const double took = std::chrono::duration<double>(steady::now() - t0).count();
  return took;
}

long unreleased(baton::mutex_backend& backend, const daemon_setup& d, long schedules) {
  long n = 0;
  for (long i = 0; i < schedules; ++i)
    if (!backend.read_owner(d.prefix + std::to_string(i)).owner_id.empty()) ++n;
  return n;
}

void run_idle(const std::string& type, long schedules, std::chrono::seconds window) {
  // One config for the daemon and this process (for SQLite each call makes a new file).
  const auto config = bb::backend_config_for(type);
  auto d = write_config(config, schedules, "0 0 1 1 *", "idle");
  std::cerr << "fire " << type << ": idle daemon with " << schedules << " schedules\n";
  baton::runtime rt;
  auto backend = baton::make_backend(config, rt);
  auto daemon = start_daemon(d);
  const double settle = wait_owned(*backend, d, schedules, type);
  std::this_thread::sleep_for(10s);  // the start-up burst passes
  const auto u0 = bb::usage_of(daemon.pid());
  const auto t0 = steady::now();
  long threads_max = 0, rss_max = 0;
  while (steady::now() - t0 < window) {
    const auto u = bb::usage_of(daemon.pid());
    threads_max = std::max(threads_max, u.threads);
    rss_max = std::max(rss_max, u.rss_bytes);
    std::this_thread::sleep_for(500ms);
  }
  const auto u1 = bb::usage_of(daemon.pid());
  const double secs = std::chrono::duration<double>(steady::now() - t0).count();
  const double stop_s = stop_daemon(daemon);
  const long left = unreleased(*backend, d, schedules);
  std::map<std::string, std::string> extra{{"schedules", std::to_string(schedules)},
                                           {"all_owned_after_s", std::to_string(settle)},
                                           {"window_s", std::to_string(static_cast<int>(secs))}};
  bb::emit_value("fire_idle_threads", type, "baton", "threads", static_cast<double>(threads_max),
                 extra);
  bb::emit_value("fire_idle_rss", type, "baton", "MiB", static_cast<double>(rss_max) / 1048576.0,
                 extra);
  bb::emit_value("fire_idle_cpu", type, "baton", "% of one core",
                 (u1.cpu_seconds - u0.cpu_seconds) / secs * 100.0, extra);
  bb::emit_value("fire_idle_stop", type, "baton", "s", stop_s,
                 {{"schedules", std::to_string(schedules)}, {"unreleased", std::to_string(left)}});
  std::cerr << "fire " << type << ": idle: threads " << threads_max << ", RSS " << rss_max / 1048576
            << " MiB, CPU " << (u1.cpu_seconds - u0.cpu_seconds) / secs * 100.0
            << " %, settled after " << settle << " s, stop " << stop_s << " s, unreleased " << left
            << "\n";
}

void run_firing(const std::string& type, long schedules, int fires) {
  const auto config = bb::backend_config_for(type);
  auto d = write_config(config, schedules, "* * * * *", "firing");
  std::cerr << "fire " << type << ": daemon with " << schedules
            << " schedules firing every minute\n";
  baton::runtime rt;
  auto backend = baton::make_backend(config, rt);
  auto daemon = start_daemon(d);
  const double settle = wait_owned(*backend, d, schedules, type);
  // The first fire measured: the next minute at least 5 s away.
  const long long first_slot = (wall_ms() + 5'000) / 60'000 * 60'000 + 60'000;
  const long long last_slot = first_slot + (fires - 1) * 60'000LL;
  std::cerr << "fire " << type << ": all owned after " << settle << " s; measuring " << fires
            << " fire(s) from " << (first_slot - wall_ms()) / 1000 << " s on\n";
  while (wall_ms() < first_slot - 1'000) std::this_thread::sleep_for(100ms);
  const auto before = bb::usage_of(daemon.pid());
  const double children0 = children_cpu(daemon.pid());
  const long steps0 = count_lines(d.log_file, "local lease ran out");
  const auto t0 = steady::now();
  long threads_max = 0, rss_max = 0;
  const long long end = last_slot + 50'000;
  while (wall_ms() < end) {
    const auto u = bb::usage_of(daemon.pid());
    threads_max = std::max(threads_max, u.threads);
    rss_max = std::max(rss_max, u.rss_bytes);
    std::this_thread::sleep_for(200ms);
  }
  const auto after = bb::usage_of(daemon.pid());
  const double children1 = children_cpu(daemon.pid());
  const double secs = std::chrono::duration<double>(steady::now() - t0).count();
  const auto metrics = baton::test::http_get(d.http_port, "/metrics", 30s);
  const double step_downs = metric_sum(metrics.body, "baton_lease_step_downs_total");
  const double losses = metric_sum(metrics.body, "baton_lease_losses_total");
  const long steps_logged = count_lines(d.log_file, "local lease ran out") - steps0;
  // A quiet moment (every run of the last fire long done): SIGTERM.
  const double stop_s = stop_daemon(daemon);
  const long left = unreleased(*backend, d, schedules);

  // Runs per slot, lateness of the measured slots.
  std::map<long long, long> per_slot;
  std::set<std::pair<std::string, long long>> seen;
  long duplicates = 0;
  std::vector<double> lateness;
  {
    std::ifstream in(d.probe_file);
    std::string name;
    long long planned = 0, started = 0;
    while (in >> name >> planned >> started) {
      if (!seen.insert({name, planned}).second) ++duplicates;
      ++per_slot[planned];
      if (planned >= first_slot && planned <= last_slot)
        lateness.push_back(static_cast<double>(started - planned));
    }
  }
  const long expected = schedules * fires;
  const auto started = static_cast<long>(lateness.size());
  const long within_1s = static_cast<long>(
      std::count_if(lateness.begin(), lateness.end(), [](double ms) { return ms <= 1000; }));
  auto s = bb::summarize(lateness);
  std::map<std::string, std::string> extra{
      {"schedules", std::to_string(schedules)},
      {"fires", std::to_string(fires)},
      {"expected", std::to_string(expected)},
      {"started", std::to_string(started)},
      {"within_1s", std::to_string(within_1s)},
      {"duplicates", std::to_string(duplicates)},
      {"step_downs", std::to_string(static_cast<long>(step_downs))},
      {"step_downs_logged", std::to_string(steps_logged)},
      {"lease_losses", std::to_string(static_cast<long>(losses))},
      {"all_owned_after_s", std::to_string(settle)}};
  bb::emit("fire_lateness", type, "baton", "ms", s, extra);
  bb::emit_value("fire_threads", type, "baton", "threads", static_cast<double>(threads_max), extra);
  bb::emit_value("fire_rss", type, "baton", "MiB", static_cast<double>(rss_max) / 1048576.0, extra);
  bb::emit_value("fire_cpu", type, "baton", "% of one core",
                 (after.cpu_seconds - before.cpu_seconds) / secs * 100.0, extra);
  bb::emit_value("fire_children_cpu", type, "baton", "% of one core",
                 (children1 - children0) / secs * 100.0, extra);
  bb::emit_value("fire_stop", type, "baton", "s", stop_s,
                 {{"schedules", std::to_string(schedules)}, {"unreleased", std::to_string(left)}});
  std::cerr << "fire " << type << ": started " << started << " of " << expected << " (per slot:";
  for (const auto& [slot, n] : per_slot)
    std::cerr << " " << (slot - first_slot) / 1000 << "s:" << n;
  std::cerr << "), within 1 s " << within_1s << ", lateness p50 " << s.median << " p99 " << s.p99
            << " max " << s.max << " ms, duplicates " << duplicates << ", step-downs " << step_downs
            << " (logged " << steps_logged << "), losses " << losses << ", threads max "
            << threads_max << ", RSS max " << rss_max / 1048576 << " MiB, CPU "
            << (after.cpu_seconds - before.cpu_seconds) / secs * 100.0 << " % (children "
            << (children1 - children0) / secs * 100.0 << " %), stop " << stop_s << " s, unreleased "
            << left << "\n";
}

}  // namespace

int main() try {
  const bool quick = env_or("BATON_BENCH_QUICK", "0") == "1";
  const long schedules = std::stol(env_or("BATON_FIRE_SCHEDULES", "10000"));
  const int fires = std::stoi(env_or("BATON_FIRE_FIRES", quick ? "1" : "2"));
  const auto window = std::chrono::seconds(quick ? 10 : 30);
  const std::string parts = env_or("BATON_FIRE_PARTS", "idle,firing");
  ::signal(SIGPIPE, SIG_IGN);
  int rc = 0;
  for (const auto& type : bb::backends_to_run()) {
    try {
      if (parts.find("idle") != std::string::npos) run_idle(type, schedules, window);
      if (parts.find("firing") != std::string::npos) run_firing(type, schedules, fires);
    } catch (const std::exception& e) {
      std::cerr << "baton_fire_bench: " << type << ": FAILED: " << e.what() << "\n";
      rc = 1;
    }
  }
  return rc;
} catch (const std::exception& e) {
  std::cerr << "baton_fire_bench: " << e.what() << "\n";
  return 1;
}
