// baton_scale_bench: figure 4, scale.
//  (a) One process contends for 10,000 mutexes: 5,000 it owns, 5,000 held by another process
//      (baton_scale_child) that it waits for. Once settled, over an idle window it reports
//      threads, resident memory, CPU, the backend connections it holds, and backend requests
//      per second (its own, counted in-process, and the server's count for both processes).
//      Then it stops all of them at once (a graceful stop): how long until every lease is
//      released, and how many backend requests failed meanwhile.
//  (b) The daemon (daemon/: build/daemon/baton) with 1,000 schedules that rarely fire: the same
//      figures.
// Environment: as bench/run.sh sets it (BATON_TEST_*, BATON_BENCH_BIN, BATON_BENCH_DAEMON,
// BATON_BENCH_QUICK, BATON_BENCH_BACKENDS; BATON_SCALE_MUTEXES overrides 10,000).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <soci/soci.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>
#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>
#include <thread>

#include <hiredis/hiredis.h>

#include "baton/backends/factory.hpp"
#include "baton/mutex/contend_service.hpp"
#include "baton/mutex/metrics.hpp"
#include "baton/mutex/stats.hpp"
#include "common.hpp"

extern char** environ;

namespace {

using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
namespace bb = baton::bench;

[[noreturn]] void fail(const std::string& what) { throw std::runtime_error(what); }

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? v : fallback;
}

// Socket inodes of `pid`.
std::set<std::string> socket_inodes(int pid) {
  std::set<std::string> out;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(dir, ec)) {
    auto target = std::filesystem::read_symlink(e.path(), ec);
    if (ec) continue;
    auto t = target.string();
    if (t.rfind("socket:[", 0) == 0) out.insert(t.substr(8, t.size() - 9));
  }
  return out;
}

// Established TCP connections of `pid` to local port `port`.
long tcp_connections(int pid, int port) {
  auto inodes = socket_inodes(pid);
  long count = 0;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);
    while (std::getline(in, line)) {
      std::istringstream f(line);
      std::string sl, local, remote, st, q, tr, retr, uid, timeout, inode;
      f >> sl >> local >> remote >> st >> q >> tr >> retr >> uid >> timeout >> inode;
      if (st != "01") continue;
      auto colon = remote.rfind(':');
      if (colon == std::string::npos) continue;
      if (std::stoi(remote.substr(colon + 1), nullptr, 16) != port) continue;
      if (inodes.count(inode)) ++count;
    }
  }
  return count;
}

// Open descriptors of `pid` on files whose path starts with `prefix`.
long file_handles(int pid, const std::string& prefix) {
  long count = 0;
  std::error_code ec;
  for (const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/fd", ec)) {
    auto target = std::filesystem::read_symlink(e.path(), ec);
    if (!ec && target.string().rfind(prefix, 0) == 0) ++count;
  }
  return count;
}

int port_of(const std::string& type) {
  if (type == "postgresql") return std::stoi(env_or("BATON_TEST_POSTGRES_PORT", "0"));
  if (type == "mysql") return std::stoi(env_or("BATON_TEST_MYSQL_PORT", "0"));
  if (type == "redis") return std::stoi(env_or("BATON_TEST_REDIS_PORT", "0"));
  if (type == "zookeeper") return std::stoi(env_or("BATON_TEST_ZOOKEEPER_PORT", "0"));
  return 0;
}

std::string four_letter(int port, const std::string& word) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) {
    (void)!write(fd, word.data(), word.size());
    char buf[4096];
    for (ssize_t n; (n = read(fd, buf, sizeof buf)) > 0;)
      out.append(buf, static_cast<std::size_t>(n));
  }
  close(fd);
  return out;
}

// The server's own count of requests served (all clients), or nullopt where it has none.
std::optional<double> server_requests(const std::string& type) {
  try {
    if (type == "redis") {
      redisContext* c = redisConnect("127.0.0.1", port_of("redis"));
      if (!c || c->err) return std::nullopt;
      auto* r = static_cast<redisReply*>(redisCommand(c, "INFO stats"));
      std::optional<double> v;
      if (r && r->type == REDIS_REPLY_STRING) {
        std::string s(r->str, r->len);
        auto p = s.find("total_commands_processed:");
        if (p != std::string::npos) v = std::stod(s.substr(p + 25));
      }
      if (r) freeReplyObject(r);
      redisFree(c);
      return v;
    }
    if (type == "zookeeper") {
      auto s = four_letter(port_of("zookeeper"), "srvr");
      auto p = s.find("Received: ");
      if (p == std::string::npos) return std::nullopt;
      return std::stod(s.substr(p + 10));
    }
    if (type == "postgresql") {
      soci::session s("postgresql", env_or("BATON_TEST_POSTGRES", ""));
      long long n = 0;
      s << "SELECT pg_stat_force_next_flush()";
      s << "SELECT sum(xact_commit + xact_rollback)::bigint FROM pg_stat_database", soci::into(n);
      return static_cast<double>(n);
    }
    if (type == "mysql") {
      soci::session s("mysql", env_or("BATON_TEST_MYSQL", ""));
      std::string name, value;
      s << "SHOW GLOBAL STATUS LIKE 'Questions'", soci::into(name), soci::into(value);
      return std::stod(value);
    }
  } catch (const std::exception& e) {
    std::cerr << "scale: server counter of " << type << ": " << e.what() << "\n";
  }
  return std::nullopt;
}

struct counting final : baton::mutex_contender {
  std::atomic<long> owned{0};
  void on_acquired(const baton::mutex_state&) override { ++owned; }
  void on_released(const baton::mutex_state&) override { --owned; }
};

std::vector<std::string> child_args(const baton::backend_config& config) {
  std::vector<std::string> a{"--type", config.type};
  for (const auto& [k, v] : config.params) {
    a.push_back("--param");
    a.push_back(k + "=" + v);
  }
  return a;
}

struct window_figures {
  bb::process_usage start, end;
  double seconds = 0;
  double own_requests = -1;
  std::optional<double> server_requests;
  long connections = 0;
};

// Samples `pid` over `window`; `own` reads this process's request counter (when pid is us).
window_figures measure(int pid, const std::string& type, std::chrono::seconds window, bool own,
                       const std::string& sqlite_path) {
  window_figures f;
  const auto server0 = server_requests(type);
  const auto own0 = baton::backend_requests_sent();
  f.start = bb::usage_of(pid);
  const auto t0 = steady::now();
  std::this_thread::sleep_for(window);
  f.end = bb::usage_of(pid);
  f.seconds = std::chrono::duration<double>(steady::now() - t0).count();
  const auto own1 = baton::backend_requests_sent();
  const auto server1 = server_requests(type);
  if (own) f.own_requests = static_cast<double>(own1 - own0) / f.seconds;
  if (server0 && server1) f.server_requests = (*server1 - *server0) / f.seconds;
  f.connections =
      type == "sqlite" ? file_handles(pid, sqlite_path) : tcp_connections(pid, port_of(type));
  return f;
}

void report(const std::string& figure, const std::string& backend, const window_figures& f,
            std::map<std::string, std::string> extra) {
  const double cpu = (f.end.cpu_seconds - f.start.cpu_seconds) / f.seconds * 100.0;
  extra["window_s"] = std::to_string(static_cast<int>(f.seconds + 0.5));
  bb::emit_value(figure + "_threads", backend, "baton", "threads",
                 static_cast<double>(f.end.threads), extra);
  bb::emit_value(figure + "_rss", backend, "baton", "MiB",
                 static_cast<double>(f.end.rss_bytes) / 1048576.0, extra);
  bb::emit_value(figure + "_idle_cpu", backend, "baton", "% of one core", cpu, extra);
  bb::emit_value(figure + "_connections", backend, "baton",
                 backend == "sqlite" ? "open database files" : "TCP connections",
                 static_cast<double>(f.connections), extra);
  if (f.own_requests >= 0)
    bb::emit_value(figure + "_requests", backend, "baton", "requests/s", f.own_requests, extra);
  if (f.server_requests)
    bb::emit_value(figure + "_server_requests", backend, "baton",
                   "requests/s (server, all clients)", *f.server_requests, extra);
}

void run_mutexes(const std::string& type, long total, std::chrono::seconds window) {
  auto config = bb::backend_config_for(type);
  const std::string sqlite_path = type == "sqlite" ? config.params["path"] : "";
  const std::string prefix = "scale-" + std::to_string(getpid()) + "-";
  const long half = total / 2;
  // 10,000 (the default) reports as figure "scale_mutexes", any other count as
  // "scale_mutexes_<count>" (bench/run.sh also runs 100,000).
  const std::string figure =
      total == 10000 ? "scale_mutexes" : "scale_mutexes_" + std::to_string(total);

  auto args = child_args(config);
  std::vector<std::string> argv{env_or("BATON_BENCH_BIN", ".") + "/baton_scale_child"};
  argv.insert(argv.end(), args.begin(), args.end());
  for (auto s : {"--prefix", prefix.c_str(), "--from", "0"}) argv.emplace_back(s);
  argv.emplace_back("--count");
  argv.emplace_back(std::to_string(half));
  std::cerr << "scale " << type << ": holder process takes " << half << " mutexes\n";
  const auto t_child = steady::now();
  bb::child_process holder(argv, bb::bench_child_options);
  if (!holder.wait_line("OWNED", 300s))
    fail(type + ": the holder process did not own its mutexes within 300 s");
  const double holder_s = std::chrono::duration<double>(steady::now() - t_child).count();

  baton::runtime rt;
  auto backend = baton::make_backend(config, rt);
  auto who = std::make_shared<counting>();
  std::vector<std::shared_ptr<baton::contend_service>> services;
  services.reserve(static_cast<std::size_t>(total));
  std::cerr << "scale " << type << ": this process contends for " << total << " mutexes\n";
  const auto t0 = steady::now();
  for (long i = 0; i < total; ++i) {
    services.push_back(
        backend->make_contend_service(prefix + std::to_string(i), who, backend->default_options()));
    services.back()->start();
  }
  const auto deadline = steady::now() + 300s;
  while (who->owned.load() < total - half) {
    if (steady::now() > deadline)
      fail(type + ": owned only " + std::to_string(who->owned.load()) + " of " +
           std::to_string(total - half) + " within 300 s");
    std::this_thread::sleep_for(10ms);
  }
  // Settled also means that every waiter has queued and seen its owner (ZooKeeper waiters are
  // still creating lock nodes and setting watches well after the owned half is in).
  auto waiting_unsettled = [&] {
    return std::count_if(services.begin(), services.end(), [](const auto& s) {
      return !s->is_owner() && s->last_observed().owner_id.empty();
    });
  };
  for (auto left = waiting_unsettled(); left > 0; left = waiting_unsettled()) {
    if (steady::now() > deadline)
      fail(type + ": " + std::to_string(left) + " waiters saw no owner within 300 s");
    std::this_thread::sleep_for(100ms);
  }
  const double settle_s = std::chrono::duration<double>(steady::now() - t0).count();
  std::cerr << "scale " << type << ": owns " << who->owned.load()
            << ", and every waiter saw its owner, after " << settle_s << " s; idle window "
            << window.count() << " s\n";
  // Let the start-up burst pass: renewals and polls spread out over one ttl.
  std::this_thread::sleep_for(backend->default_options().ttl);
  auto f = measure(getpid(), type, window, true, sqlite_path);
  const long owned_after = who->owned.load();
  report(figure, type, f,
         {{"mutexes", std::to_string(total)},
          {"owned", std::to_string(owned_after)},
          {"all_owned_after_s", std::to_string(settle_s)},
          {"holder_ready_s", std::to_string(holder_s)},
          {"holder_cpu_pct", ""}});
  if (owned_after != total - half)
    std::cerr << "scale " << type << ": WARNING owned " << owned_after
              << " at the end of the window\n";
  // A graceful stop of everything at once: every owned lease released, every waiter leaves
  // its queue. How long until all are done, and how many backend requests failed meanwhile
  // (a failed release leaves a lease for others to wait out).
  const auto failures_before = baton::test::backend_failures(type);
  const auto t_stop = steady::now();
  auto stopped = std::make_shared<std::atomic<long>>(0);
  for (auto& s : services) s->stop([stopped] { ++*stopped; });
  const auto stop_deadline = steady::now() + 120s;
  while (stopped->load() < total && steady::now() < stop_deadline) std::this_thread::sleep_for(1ms);
  const double stop_s = std::chrono::duration<double>(steady::now() - t_stop).count();
  const auto failed = baton::test::backend_failures(type) - failures_before;
  std::cerr << "scale " << type << ": stopped " << stopped->load() << " of " << total << " ("
            << owned_after << " owned) in " << stop_s << " s; " << failed
            << " backend requests failed\n";
  const std::map<std::string, std::string> stop_extra{{"mutexes", std::to_string(total)},
                                                      {"owned", std::to_string(owned_after)},
                                                      {"stopped", std::to_string(stopped->load())}};
  bb::emit_value(figure + "_stop", type, "baton", "s", stop_s, stop_extra);
  bb::emit_value(figure + "_stop_failures", type, "baton", "failed requests",
                 static_cast<double>(failed), stop_extra);
  holder.close_stdin();  // asks it to stop
  holder.wait_exit(30s);
}

void run_daemon(const std::string& type, long schedules, std::chrono::seconds window) {
  auto config = bb::backend_config_for(type);
  const std::string dir = env_or("BATON_TEST_TMPDIR", "/tmp");
  const std::string file = dir + "/scale-daemon-" + type + ".json";
  const std::string prefix = "daemon-" + std::to_string(getpid()) + "-";
  {
    std::ofstream out(file);
    out << "{\n  \"backend\": {\"type\": \"" << type << "\"";
    for (const auto& [k, v] : config.params) out << ", \"" << k << "\": \"" << v << "\"";
    out << "},\n  \"log_level\": \"warn\",\n  \"schedules\": [\n";
    for (long i = 0; i < schedules; ++i)
      out << "    {\"name\": \"" << prefix << i
          << "\", \"cron\": \"0 0 1 1 *\", \"command\": [\"true\"]}"
          << (i + 1 < schedules ? ",\n" : "\n");
    out << "  ]\n}\n";
  }
  std::cerr << "scale " << type << ": daemon with " << schedules << " schedules\n";
  bb::child_process daemon({env_or("BATON_BENCH_DAEMON", "baton"), "run", "--config", file},
                           bb::bench_child_options);
  baton::runtime rt;
  auto backend = baton::make_backend(config, rt);
  const double settle_s =
      bb::wait_owned(*backend, prefix, schedules, type + ": the daemon's schedules");
  std::this_thread::sleep_for(10s);
  auto f = measure(daemon.pid(), type, window, false, config.params["path"]);
  report(
      "scale_daemon", type, f,
      {{"schedules", std::to_string(schedules)}, {"all_owned_after_s", std::to_string(settle_s)}});
  daemon.signal(SIGTERM);
  daemon.wait_exit(60s);
}

}  // namespace

int main() try {
  const bool quick = env_or("BATON_BENCH_QUICK", "0") == "1";
  const long total = std::stol(env_or("BATON_SCALE_MUTEXES", "10000"));
  const auto window = std::chrono::seconds(quick ? 10 : 30);
  const std::string what = env_or("BATON_SCALE_PARTS", "mutexes,daemon");
  for (const auto& type : bb::backends_to_run()) {
    if (what.find("mutexes") != std::string::npos) run_mutexes(type, total, window);
    if (what.find("daemon") != std::string::npos) run_daemon(type, 1000, window);
  }
  return 0;
} catch (const std::exception& e) {
  std::cerr << "baton_scale_bench: " << e.what() << "\n";
  return 1;
}
