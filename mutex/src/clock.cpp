#include "baton/mutex/clock.hpp"

namespace baton {

clock_sample estimate_clock_offset(backend_time backend_now,
                                   std::chrono::system_clock::time_point sent,
                                   std::chrono::system_clock::time_point received) noexcept {
  using std::chrono::milliseconds;
  if (received < sent) received = sent;  // the wall clock stepped back meanwhile
  const auto half = (received - sent) / 2;
  const auto mid = std::chrono::time_point_cast<milliseconds>(sent + half);
  return {std::chrono::duration_cast<milliseconds>(backend_now - mid),
          std::chrono::ceil<milliseconds>(half)};
}

bool clock_offset_exceeds(const clock_sample& sample, std::chrono::milliseconds max) noexcept {
  if (max <= std::chrono::milliseconds::zero()) return false;
  const auto magnitude =
      sample.offset < std::chrono::milliseconds::zero() ? -sample.offset : sample.offset;
  return magnitude - sample.uncertainty > max;
}

bool clock_offset_moved(const clock_sample& sample, std::chrono::milliseconds logged,
                        std::chrono::milliseconds by) noexcept {
  const auto moved = sample.offset - logged;
  const auto magnitude = moved < std::chrono::milliseconds::zero() ? -moved : moved;
  return magnitude - sample.uncertainty > by;
}

}  // namespace baton
