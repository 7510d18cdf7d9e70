// baton_zk_holder: contends for one ZooKeeper mutex in a separate process and reports what it
// sees, for tests that stop (SIGSTOP) or kill the owner process.
//   baton_zk_holder --hosts H --mutex M [--session-timeout 2s] [--max-clock-offset MS]
// Prints (CLOCK_MONOTONIC ns):
//   STARTED ns                      contending
//   ACQUIRED fence ns / LOST ns     on_acquired / on_released
//   OWNER 1 fence ns / OWNER 0 ns   is_owner() changed, as a probe polling every millisecond saw it
//   RESUMED gap_ms owner fence ns   the probe was not scheduled for gap_ms (> 200): the process was
//                                   stopped; `owner` is is_owner() at the first look after it
//   CLOCK offset_ms refused ns      clock_offset() (backend minus local) or clock_refused() changed
// On SIGTERM: releases, prints RELEASED ns, exits 0.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <iostream>
#include <optional>
#include <thread>

#include "baton/backends/factory.hpp"
#include "support/process.hpp"

using namespace std::chrono_literals;

namespace {

void say(const std::string& line) {
  std::string out = line + "\n";
  (void)!::write(STDOUT_FILENO, out.data(), out.size());
}

std::string now() { return std::to_string(baton::test::mono_ns()); }

struct reporter final : baton::mutex_contender {
  void on_acquired(const baton::mutex_state& s) override {
    say("ACQUIRED " + std::to_string(s.after.fence) + " " + now());
  }
  void on_released(const baton::mutex_state&) override { say("LOST " + now()); }
};

}  // namespace

int main(int argc, char** argv) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  try {
    baton::backend_config config{"zookeeper", {{"session_timeout", "2s"}}};
    std::string mutex = "holder";
    long long max_clock_offset_ms = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
      std::string key = argv[i], value = argv[i + 1];
      if (key == "--hosts")
        config.params["hosts"] = value;
      else if (key == "--mutex")
        mutex = value;
      else if (key == "--session-timeout")
        config.params["session_timeout"] = value;
      else if (key == "--max-clock-offset")
        max_clock_offset_ms = std::stoll(value);
      else
        throw std::invalid_argument("unknown argument " + key);
    }
    baton::runtime rt;
    auto backend = baton::make_backend(config, rt);
    auto who = std::make_shared<reporter>();
    auto options = backend->default_options();
    options.max_clock_offset = std::chrono::milliseconds{max_clock_offset_ms};
    auto service = backend->make_contend_service(mutex, who, options);
    std::atomic<bool> done{false};
    std::thread probe([&] {
      bool owner = false;
      std::optional<baton::clock_sample> clock;
      bool refused = false;
      auto last = std::chrono::steady_clock::now();
      while (!done) {
        const auto t = std::chrono::steady_clock::now();
        const bool o = service->is_owner();
        const auto fence = service->fence();
        const auto gap = std::chrono::duration_cast<std::chrono::milliseconds>(t - last);
        if (gap > 200ms)
          say("RESUMED " + std::to_string(gap.count()) + " " + (o ? "1 " : "0 ") +
              std::to_string(fence) + " " + now());
        if (o != owner)
          say(std::string("OWNER ") + (o ? "1 " + std::to_string(fence) + " " : "0 ") + now());
        owner = o;
        last = t;
        const auto c = service->clock_offset();
        const bool r = service->clock_refused();
        if (c && (!clock || c->offset != clock->offset || r != refused))
          say("CLOCK " + std::to_string(c->offset.count()) + (r ? " 1 " : " 0 ") + now());
        clock = c;
        refused = r;
        std::this_thread::sleep_for(1ms);
      }
    });
    service->start();
    say("STARTED " + now());
    int sig = 0;
    sigwait(&set, &sig);
    bool released = service->stop_and_wait(10s);
    done = true;
    probe.join();
    say(std::string(released ? "RELEASED " : "RELEASE-TIMEOUT ") + now());
    return released ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "baton_zk_holder: " << e.what() << "\n";
    return 2;
  }
}
