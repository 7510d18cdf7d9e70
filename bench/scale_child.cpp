// baton_scale_child: holds many mutexes for the scale benchmark.
//   baton_scale_child --type T [--param k=v]... --prefix P --from A --count N
// Contends for P<A> .. P<A+N-1> with the backend's default options, prints "OWNED <n>" once it
// owns all of them, and stops (releasing everything) when stdin closes or on SIGTERM.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <iostream>
#include <thread>

#include "baton/backends/factory.hpp"
#include "baton/mutex/contend_service.hpp"

namespace {

struct counter final : baton::mutex_contender {
  std::atomic<long> owned{0};
  void on_acquired(const baton::mutex_state&) override { ++owned; }
  void on_released(const baton::mutex_state&) override { --owned; }
};

}  // namespace

int main(int argc, char** argv) try {
  baton::backend_config config;
  std::string prefix = "scale-";
  long from = 0, count = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string key = argv[i], value = argv[i + 1];
    if (key == "--type") {
      config.type = value;
    } else if (key == "--param") {
      auto eq = value.find('=');
      if (eq == std::string::npos) throw std::invalid_argument("--param needs key=value");
      config.params[value.substr(0, eq)] = value.substr(eq + 1);
    } else if (key == "--prefix") {
      prefix = value;
    } else if (key == "--from") {
      from = std::stol(value);
    } else if (key == "--count") {
      count = std::stol(value);
    } else {
      throw std::invalid_argument("unknown argument " + key);
    }
  }
  baton::runtime rt;
  auto backend = baton::make_backend(config, rt);
  auto who = std::make_shared<counter>();
  std::vector<std::shared_ptr<baton::contend_service>> services;
  services.reserve(static_cast<std::size_t>(count));
  for (long i = from; i < from + count; ++i) {
    services.push_back(
        backend->make_contend_service(prefix + std::to_string(i), who, backend->default_options()));
    services.back()->start();
  }
  std::atomic<bool> done{false};
  std::thread reader([&] {
    char buf[256];
    while (read(0, buf, sizeof buf) > 0) {
    }
    done = true;
  });
  reader.detach();
  bool reported = false;
  while (!done) {
    if (!reported && who->owned.load() == count) {
      std::printf("OWNED %ld\n", count);
      std::fflush(stdout);
      reported = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  auto stopped = std::make_shared<std::atomic<long>>(0);
  for (auto& s : services) s->stop([stopped] { ++*stopped; });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (stopped->load() < count && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  return 0;
} catch (const std::exception& e) {
  std::cerr << "baton_scale_child: " << e.what() << "\n";
  return 1;
}
