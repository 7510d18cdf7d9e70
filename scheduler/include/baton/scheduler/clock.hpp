#pragma once
/// The scheduler's time source, injectable so that tests can move time by hand.
#include <atomic>
#include <chrono>
#include <memory>

namespace baton {

/// Wall clock (planned fire times, cron) and steady clock (lease deadlines, timeouts).
class scheduler_clock {
 public:
  virtual ~scheduler_clock() = default;
  virtual std::chrono::system_clock::time_point now_system() const = 0;
  virtual std::chrono::steady_clock::time_point now_steady() const = 0;
};

/// The real clocks.
std::shared_ptr<const scheduler_clock> system_scheduler_clock();

/// A clock that moves only when told to (tests). Thread-safe.
class manual_clock final : public scheduler_clock {
 public:
  explicit manual_clock(std::chrono::system_clock::time_point system = {},
                        std::chrono::steady_clock::time_point steady = {})
      : system_(system), steady_(steady) {}
  std::chrono::system_clock::time_point now_system() const override { return system_.load(); }
  std::chrono::steady_clock::time_point now_steady() const override { return steady_.load(); }
  /// Moves both clocks forward by `d`.
  void advance(std::chrono::nanoseconds d) {
    system_.store(system_.load() +
                  std::chrono::duration_cast<std::chrono::system_clock::duration>(d));
    steady_.store(steady_.load() +
                  std::chrono::duration_cast<std::chrono::steady_clock::duration>(d));
  }
  /// Sets the wall clock only (a clock step).
  void set_system(std::chrono::system_clock::time_point t) { system_.store(t); }

 private:
  std::atomic<std::chrono::system_clock::time_point> system_;
  std::atomic<std::chrono::steady_clock::time_point> steady_;
};

}  // namespace baton
