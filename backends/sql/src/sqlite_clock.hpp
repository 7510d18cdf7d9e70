#pragma once
// SQLite has no server, so it has no server clock: every node on the file is a process on one
// host, and the lease times in the file are on that host's monotonic clock (ms since boot),
// never on a process's wall clock. The file's meta table names the boot the times belong to.
// Header-only, so that the unit tests reach the pure parts.
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <fstream>
#include <string>

namespace baton::backends::sql::detail {

/// The kernel's clock `id` in ms, read with the raw clock_gettime system call rather than the
/// libc/vDSO function: a per-process LD_PRELOAD clock (libfaketime, as used to test skewed
/// nodes, or any other interposer) replaces the libc function but not the system call, and a
/// lease on a file shared by several processes must not follow one process's idea of the time.
inline long long raw_clock_ms(clockid_t id) noexcept {
  struct timespec ts {};
  if (::syscall(SYS_clock_gettime, id, &ts) != 0) return 0;
  return static_cast<long long>(ts.tv_sec) * 1000 + ts.tv_nsec / 1000000;
}

/// CLOCK_MONOTONIC in ms (raw system call): the time base of SQLite lease times. One clock for
/// every process of the host; no process's wall clock (nor a step of the host's) moves it.
inline long long monotonic_ms() noexcept { return raw_clock_ms(CLOCK_MONOTONIC); }

/// CLOCK_REALTIME in ms (raw system call): the host's wall clock as the kernel keeps it, for
/// display and for lease_grant::now (so a process with a skewed clock sees its offset).
inline long long realtime_ms() noexcept { return raw_clock_ms(CLOCK_REALTIME); }

/// This boot's id (/proc/sys/kernel/random/boot_id, 36 characters), or "" when unreadable.
inline std::string boot_id() {
  std::ifstream in("/proc/sys/kernel/random/boot_id");
  std::string id;
  std::getline(in, id);
  while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
  return id;
}

/// Wall clock minus monotonic clock now (both raw): wall = monotonic + this, at this instant.
inline long long wall_minus_monotonic_ms() noexcept {
  // Read the wall clock between two monotonic readings and take their midpoint.
  const long long m1 = monotonic_ms();
  const long long w = realtime_ms();
  const long long m2 = monotonic_ms();
  return w - (m1 + (m2 - m1) / 2);
}

/// The offset to use from a `fresh` sample when `settled` was used so far: the same unless they
/// differ by more than `tolerance_ms` (the wall clock was stepped or slewed that far). Two
/// samples of the same offset differ by a millisecond now and then (two clocks read at slightly
/// different instants, each cut to ms); displayed times must not flicker with that.
constexpr long long settled_offset_ms(long long settled, long long fresh,
                                      long long tolerance_ms = 2) noexcept {
  const long long diff = fresh > settled ? fresh - settled : settled - fresh;
  return diff > tolerance_ms ? fresh : settled;
}

/// wall_minus_monotonic_ms(), settled for this process (settled_offset_ms): what SQLite grants
/// show times with.
inline long long display_offset_ms() noexcept {
  static std::atomic<long long> settled{wall_minus_monotonic_ms()};
  const long long fresh = wall_minus_monotonic_ms();
  long long current = settled.load(std::memory_order_relaxed);
  const long long next = settled_offset_ms(current, fresh);
  if (next != current) settled.compare_exchange_strong(current, next, std::memory_order_relaxed);
  return settled.load(std::memory_order_relaxed);
}

/// A stored lease time (monotonic ms) shown as wall-clock ms: wall = realtime_now − (mono_now −
/// t) = t + (wall − mono). 0 means "never" (a row that was never acquired) and stays 0.
constexpr long long to_wall_ms(long long mono_t, long long wall_minus_mono) noexcept {
  return mono_t == 0 ? 0 : mono_t + wall_minus_mono;
}

/// A wall-clock time stored by a baton from before monotonic SQLite times (julianday('now') of
/// whichever process wrote it) on this boot's monotonic clock. 0 stays 0.
constexpr long long legacy_to_monotonic_ms(long long wall_t, long long wall_minus_mono) noexcept {
  return wall_t == 0 ? 0 : wall_t - wall_minus_mono;
}

/// A monotonic time of another boot on this boot's clock: moved by `delta` (the old boot's
/// wall − mono minus this one's, so that it keeps its wall-clock meaning for display), and, for
/// a deadline (ttl_at, transition_at), never later than just before `now`: no lease or lockout
/// survives a reboot, because no process of the old boot does. 0 stays 0.
constexpr long long rebased_ms(long long t, long long delta, long long now,
                               bool deadline) noexcept {
  if (t == 0) return 0;
  const long long moved = t + delta;
  return deadline ? std::min(moved, now - 1) : moved;
}

}  // namespace baton::backends::sql::detail
