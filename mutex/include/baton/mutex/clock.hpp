#pragma once
/// This host's wall clock measured against the backend's: cron fires on the backend-corrected
/// clock, and a node whose clock is too far off may refuse to lead (contend_options).
#include <chrono>
#include <cstdint>

#include "baton/mutex/owner.hpp"

namespace baton {

/// One measurement of the offset between the backend's clock and this host's wall clock.
struct clock_sample {
  /// Backend time minus local wall time: positive when this host's clock is behind.
  std::chrono::milliseconds offset{0};
  /// Half the round trip of the request that read the backend's clock: the true offset lies
  /// within offset ± uncertainty (as far as the backend's own reading is exact).
  std::chrono::milliseconds uncertainty{0};
  friend bool operator==(const clock_sample&, const clock_sample&) = default;
};

/// The offset from one request: the backend read its clock (`backend_now`) somewhere between
/// `sent` and `received` on this host's wall clock; the midpoint is taken.
clock_sample estimate_clock_offset(backend_time backend_now,
                                   std::chrono::system_clock::time_point sent,
                                   std::chrono::system_clock::time_point received) noexcept;

/// True when the offset is surely beyond `max` (|offset| - uncertainty > max). A zero or
/// negative `max` means no limit.
bool clock_offset_exceeds(const clock_sample& sample, std::chrono::milliseconds max) noexcept;

/// True when `sample` surely moved more than `by` away from the offset last logged
/// (|offset - logged| - uncertainty > by). A sample taken while the backend answered slowly
/// (uncertainty of seconds) is not news.
bool clock_offset_moved(const clock_sample& sample, std::chrono::milliseconds logged,
                        std::chrono::milliseconds by) noexcept;

}  // namespace baton
