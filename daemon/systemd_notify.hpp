#pragma once
// `baton run` under systemd (Type=notify): READY/RELOADING/STOPPING/STATUS through sd_notify, and
// the watchdog. Without NOTIFY_SOCKET in the environment every call is a no-op.
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "baton/mutex/runtime.hpp"

namespace baton::daemon {

/// Tells the service manager how `baton run` is doing. When WATCHDOG_USEC is set (WatchdogSec=),
/// a thread sends WATCHDOG=1 every half interval, but only after a probe posted to the runtime's
/// io_context has run since the last ping: a wedged io pool stops the pings, and systemd
/// restarts the daemon.
class systemd_notifier {
 public:
  /// `rt` must outlive this object; the watchdog thread (if any) starts here.
  explicit systemd_notifier(runtime& rt);
  /// Stops the watchdog thread.
  ~systemd_notifier();
  systemd_notifier(const systemd_notifier&) = delete;
  systemd_notifier& operator=(const systemd_notifier&) = delete;

  /// READY=1 with STATUS=`status` and MAINPID: start-up finished, or a reload ended (applied or
  /// rejected).
  void ready(const std::string& status) noexcept;
  /// RELOADING=1 with MONOTONIC_USEC (systemd 253 wants it): a SIGHUP reload begins.
  void reloading() noexcept;
  /// STOPPING=1 with STATUS=`status`: a stop signal arrived.
  void stopping(const std::string& status) noexcept;

  /// True when NOTIFY_SOCKET was set at construction.
  bool enabled() const noexcept { return enabled_; }
  /// The watchdog interval (WATCHDOG_USEC), zero when the watchdog is off.
  std::chrono::microseconds watchdog_interval() const noexcept { return watchdog_; }

 private:
  void watchdog_loop();

  runtime& rt_;
  bool enabled_ = false;
  std::chrono::microseconds watchdog_{0};
  std::mutex mutex_;
  std::condition_variable cv_;
  bool done_ = false;
  std::thread thread_;
};

}  // namespace baton::daemon
