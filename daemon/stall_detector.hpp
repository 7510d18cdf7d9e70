#pragma once
// The daemon's stall detector: a periodic steady timer on the runtime's io_context. When it
// wakes much later than planned, the process (or its io threads) did not run for that long:
// SIGSTOP, CPU starvation, swapping, a suspended VM. Leases may have run out locally meanwhile,
// so the pause is logged (`process.stalled`) for whoever reads the log after a takeover.
// The decision is a pure function (tests/unit/stall_detector_test.cpp drives it with made-up
// times); the timer is in stall_detector.cpp.
#include <chrono>
#include <memory>
#include <optional>

#include <boost/asio/io_context.hpp>

namespace baton::daemon {

/// How often the detector's timer wakes up.
inline constexpr std::chrono::milliseconds stall_check_period{100};
/// A wake-up this much later than planned is logged as a stall.
inline constexpr std::chrono::milliseconds stall_threshold{500};

/// How long the process stalled when a timer planned for `planned` ran at `woke`: the lateness,
/// when it is at least `threshold`; nullopt for an on-time (or early) wake-up.
constexpr std::optional<std::chrono::milliseconds> stalled_for(
    std::chrono::steady_clock::time_point planned, std::chrono::steady_clock::time_point woke,
    std::chrono::milliseconds threshold = stall_threshold) {
  if (woke < planned) return std::nullopt;
  const auto late = std::chrono::duration_cast<std::chrono::milliseconds>(woke - planned);
  if (late < threshold) return std::nullopt;
  return late;
}

/// Runs the check every `period` on `io` (on a strand of its own) until stop() or destruction,
/// and logs `process.stalled` (warning) with the pause length for every late wake-up.
class stall_detector {
 public:
  stall_detector(boost::asio::io_context& io, std::chrono::milliseconds period = stall_check_period,
                 std::chrono::milliseconds threshold = stall_threshold);
  stall_detector(const stall_detector&) = delete;
  stall_detector& operator=(const stall_detector&) = delete;
  /// stop().
  ~stall_detector();
  /// Stops checking; idempotent, noexcept, callable from any thread.
  void stop() noexcept;

 private:
  struct state;
  std::shared_ptr<state> state_;
};

}  // namespace baton::daemon
