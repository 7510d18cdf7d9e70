// baton_handover_demo: three processes contend for one mutex on one SQLite file and print every
// handover (who holds the mutex, with which fence). Each owner keeps the mutex for a few seconds,
// then steps aside so another process takes over. Ctrl-C (or --duration) stops all three.
//
//   baton_handover_demo [--db PATH] [--nodes N] [--hold SECONDS] [--duration SECONDS]
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "baton/backends/factory.hpp"

using namespace std::chrono_literals;

namespace {

volatile sig_atomic_t stop_requested = 0;
void on_signal(int) { stop_requested = 1; }

struct printer final : baton::mutex_contender {
  int node;
  explicit printer(int n) : node(n) {}
  void on_acquired(const baton::mutex_state& s) override {
    std::printf("node %d (%s) now holds 'demo' with fence %llu\n", node, s.self.c_str(),
                static_cast<unsigned long long>(s.after.fence));
    std::fflush(stdout);
  }
  void on_released(const baton::mutex_state& s) override {
    std::printf("node %d released 'demo' (fence %llu)\n", node,
                static_cast<unsigned long long>(s.before.fence));
    std::fflush(stdout);
  }
};

int run_node(int node, const std::string& db, std::chrono::seconds hold) {
  baton::runtime rt;
  baton::backend_config config{"sqlite", {{"path", db}}};
  auto backend = baton::make_backend(config, rt);
  baton::contend_options options = backend->default_options();
  options.ttl = 2s;
  options.transition = 2s;
  auto who = std::make_shared<printer>(node);
  auto service = backend->make_contend_service("demo", who, options);
  service->start();
  auto held_since = std::chrono::steady_clock::time_point{};
  while (!stop_requested) {
    std::this_thread::sleep_for(50ms);
    if (!service->is_owner()) {
      held_since = {};
      continue;
    }
    auto now = std::chrono::steady_clock::now();
    if (held_since == std::chrono::steady_clock::time_point{}) held_since = now;
    if (now - held_since >= hold) {
      // Step aside: release, give the others a moment to take over, contend again.
      service->stop_and_wait(10s);
      std::this_thread::sleep_for(500ms);
      held_since = {};
      service->start();
    }
  }
  service->stop_and_wait(10s);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string db = "baton-demo.db";
  int nodes = 3;
  long hold = 3, duration = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "baton_handover_demo: %s needs a value\n", a.c_str());
        std::exit(2);
      }
      return argv[++i];
    };
    try {
      if (a == "--db")
        db = value();
      else if (a == "--nodes")
        nodes = std::stoi(value());
      else if (a == "--hold")
        hold = std::stol(value());
      else if (a == "--duration")
        duration = std::stol(value());
      else if (a == "--help") {
        std::printf(
            "usage: baton_handover_demo [--db PATH] [--nodes N] [--hold S] [--duration S]\n");
        return 0;
      } else {
        std::fprintf(stderr, "baton_handover_demo: unknown argument '%s'\n", a.c_str());
        return 2;
      }
    } catch (const std::exception&) {
      std::fprintf(stderr, "baton_handover_demo: bad number for %s\n", a.c_str());
      return 2;
    }
  }
  if (nodes < 1 || nodes > 16 || hold < 1) {
    std::fprintf(stderr, "baton_handover_demo: --nodes must be 1..16 and --hold at least 1\n");
    return 2;
  }
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
  std::printf("%d nodes contend for mutex 'demo' on %s; each holds it %ld s. Ctrl-C stops.\n",
              nodes, db.c_str(), hold);
  std::fflush(stdout);
  std::vector<pid_t> children;
  for (int n = 1; n <= nodes; ++n) {
    pid_t pid = fork();
    if (pid == 0) {
      try {
        return run_node(n, db, std::chrono::seconds{hold});
      } catch (const std::exception& e) {
        std::fprintf(stderr, "node %d: %s\n", n, e.what());
        return 1;
      }
    }
    children.push_back(pid);
  }
  auto end = std::chrono::steady_clock::now() + std::chrono::seconds{duration};
  while (!stop_requested && (duration == 0 || std::chrono::steady_clock::now() < end))
    std::this_thread::sleep_for(100ms);
  for (pid_t pid : children) kill(pid, SIGTERM);
  int failures = 0;
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    failures += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  return failures == 0 ? 0 : 1;
}
