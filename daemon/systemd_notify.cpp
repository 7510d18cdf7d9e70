#include "systemd_notify.hpp"

#include <systemd/sd-daemon.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <memory>

#include <boost/asio/post.hpp>

#include "baton/mutex/detail/log.hpp"

namespace baton::daemon {

namespace {

/// STATUS= takes one line.
std::string one_line(std::string text) {
  for (char& c : text)
    if (c == '\n' || c == '\r') c = ' ';
  return text;
}

void notify(const std::string& message) noexcept {
  const int r = ::sd_notify(0, message.c_str());
  if (r < 0)
    detail::log({.event = "systemd.notify_failed"})
        .warn("sd_notify failed ({}): {}", -r, message.substr(0, message.find('\n')));
}

}  // namespace

systemd_notifier::systemd_notifier(runtime& rt) : rt_(rt) {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  enabled_ = socket != nullptr && *socket != '\0';
  if (!enabled_) return;
  std::uint64_t usec = 0;
  if (::sd_watchdog_enabled(0, &usec) > 0 && usec > 0) {
    watchdog_ = std::chrono::microseconds{usec};
    thread_ = std::thread([this] { watchdog_loop(); });
  }
}

systemd_notifier::~systemd_notifier() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard lock(mutex_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void systemd_notifier::ready(const std::string& status) noexcept {
  if (!enabled_) return;
  try {
    notify("READY=1\nSTATUS=" + one_line(status) + "\nMAINPID=" + std::to_string(::getpid()));
  } catch (...) {
  }
}

void systemd_notifier::reloading() noexcept {
  if (!enabled_) return;
  try {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    const auto usec = static_cast<unsigned long long>(ts.tv_sec) * 1'000'000ULL +
                      static_cast<unsigned long long>(ts.tv_nsec) / 1000ULL;
    notify("RELOADING=1\nSTATUS=reloading the config\nMONOTONIC_USEC=" + std::to_string(usec));
  } catch (...) {
  }
}

void systemd_notifier::stopping(const std::string& status) noexcept {
  if (!enabled_) return;
  try {
    notify("STOPPING=1\nSTATUS=" + one_line(status));
  } catch (...) {
  }
}

void systemd_notifier::watchdog_loop() {
  // Pings at half the interval; each one needs the probe posted after the previous ping to have
  // run on the io_context, i.e. the io pool still runs handlers.
  const auto period = std::chrono::duration_cast<std::chrono::milliseconds>(watchdog_ / 2);
  auto probe_ran = std::make_shared<std::atomic<bool>>(false);
  boost::asio::post(rt_.io(), [probe_ran] { probe_ran->store(true); });
  bool warned = false;
  std::unique_lock lock(mutex_);
  while (!cv_.wait_for(lock, period, [this] { return done_; })) {
    if (!probe_ran->exchange(false)) {
      if (!warned && !rt_.io().stopped())
        detail::log({.event = "systemd.watchdog_missed"})
            .error("watchdog: the io threads ran no handler for {} ms; not pinging systemd",
                   period.count());
      warned = true;
      continue;  // the old probe is still queued: no new one
    }
    warned = false;
    notify("WATCHDOG=1");
    boost::asio::post(rt_.io(), [probe_ran] { probe_ran->store(true); });
  }
}

}  // namespace baton::daemon
