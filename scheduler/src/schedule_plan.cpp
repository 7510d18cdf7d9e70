#include "baton/scheduler/detail/schedule_plan.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <vector>

namespace baton::detail {
namespace {

using std::chrono::milliseconds;

std::int64_t to_ms(sys_time t) {
  return std::chrono::duration_cast<milliseconds>(t.time_since_epoch()).count();
}

sys_time from_ms(std::int64_t ms) { return sys_time{milliseconds{ms}}; }

sys_time floor_ms(sys_time t) {
  return sys_time{std::chrono::floor<milliseconds>(t.time_since_epoch())};
}

template <class Int>
bool parse_int(std::string_view text, Int& out) {
  if (text.empty()) return false;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc{} && ptr == text.data() + text.size();
}

std::vector<std::string_view> split(std::string_view text) {
  std::vector<std::string_view> parts;
  while (!text.empty()) {
    auto space = text.find(' ');
    if (space == 0) {
      text.remove_prefix(1);
      continue;
    }
    parts.push_back(text.substr(0, space));
    if (space == std::string_view::npos) break;
    text.remove_prefix(space + 1);
  }
  return parts;
}

}  // namespace

std::string format_schedule_state(const recorded_fire& r) {
  std::string s = "v1 " + std::to_string(to_ms(r.last_fire)) + " " + std::to_string(r.fence);
  if (r.last_end) s += " " + std::to_string(to_ms(*r.last_end));
  return s;
}

std::optional<recorded_fire> parse_schedule_state(std::string_view text) {
  auto parts = split(text);
  if (parts.size() < 3 || parts.size() > 4 || parts[0] != "v1") return std::nullopt;
  std::int64_t fire = 0;
  recorded_fire r;
  if (!parse_int(parts[1], fire) || !parse_int(parts[2], r.fence)) return std::nullopt;
  r.last_fire = from_ms(fire);
  if (parts.size() == 4) {
    std::int64_t end = 0;
    if (!parse_int(parts[3], end)) return std::nullopt;
    r.last_end = from_ms(end);
  }
  return r;
}

std::string format_state(const schedule_state& s) {
  if (s.manual_runs == 0) return s.fire ? format_schedule_state(*s.fire) : std::string();
  std::string out = "v2 " + std::to_string(s.manual_runs);
  if (s.fire) out += format_schedule_state(*s.fire).substr(2);  // " <fire> <fence>[ <end>]"
  return out;
}

std::optional<schedule_state> parse_state(std::string_view text) {
  schedule_state out;
  auto parts = split(text);
  if (parts.empty()) return out;
  if (parts[0] == "v1") {
    out.fire = parse_schedule_state(text);
    if (!out.fire) return std::nullopt;
    return out;
  }
  if (parts[0] != "v2" || parts.size() < 2 || !parse_int(parts[1], out.manual_runs))
    return std::nullopt;
  if (parts.size() == 2) return out;
  std::string v1 = "v1";
  for (std::size_t i = 2; i < parts.size(); ++i) (v1 += ' ') += parts[i];
  out.fire = parse_schedule_state(v1);
  if (!out.fire) return std::nullopt;
  return out;
}

run_outcome classify_outcome(stop_cause stop, bool threw, const run_report& report) noexcept {
  switch (stop) {
    case stop_cause::timeout:
      return run_outcome::timed_out;
    case stop_cause::lost_lease:
    case stop_cause::shutdown:
      return run_outcome::lost_lease;
    case stop_cause::none:
      break;
  }
  if (report.signal) return run_outcome::killed;
  if (threw) return run_outcome::failed;
  return run_outcome::succeeded;
}

bool retryable(run_outcome o) noexcept {
  return o == run_outcome::failed || o == run_outcome::killed || o == run_outcome::timed_out;
}

milliseconds retry_delay(milliseconds backoff, unsigned n) noexcept {
  constexpr milliseconds cap{24LL * 3600 * 1000};
  if (backoff <= milliseconds::zero()) return milliseconds::zero();
  milliseconds d = std::min(backoff, cap);
  for (unsigned i = 1; i < n && d < cap; ++i) d = std::min(d * 2, cap);
  return d;
}

bool retry_fits(sys_time at, std::optional<sys_time> next_fire) noexcept {
  return !next_fire || at < *next_fire;
}

std::size_t history_queue::push(item i) {
  std::size_t dropped = 0;
  while (!items_.empty() && items_.size() >= std::max<std::size_t>(bound_, 1)) {
    items_.pop_front();
    ++dropped;
  }
  items_.push_back(std::move(i));
  return dropped;
}

schedule_plan::schedule_plan(trigger when, misfire_policy policy, milliseconds on_time_window)
    : when_(std::move(when)),
      policy_(policy),
      window_(on_time_window),
      active_window_(on_time_window) {}

void schedule_plan::resume(const std::optional<recorded_fire>& recorded, sys_time now) {
  start(recorded, now);
  active_window_ = milliseconds::zero();
}

void schedule_plan::start(const std::optional<recorded_fire>& recorded, sys_time now) {
  leader_since_ = now;
  active_window_ = window_;
  awaiting_end_ = false;
  candidate_.reset();
  last_fire_.reset();
  if (const auto* every = std::get_if<every_trigger>(&when_)) {
    if (!recorded) {
      candidate_ = floor_ms(now) + every->initial_delay;
      return;
    }
    last_fire_ = recorded->last_fire;
    // Never a slot at or before the recorded one, even when the record is ahead of `now` (a
    // leader whose clock ran ahead wrote it, or the backend's clock stepped back): waiting is
    // better than running a fire time twice.
    const sys_time last = recorded->last_fire;
    if (every->mode == every_mode::fixed_rate) {
      candidate_ = last + every->period;
    } else {
      // The end of the last run; unknown (it was cut short by the handover) = the acquisition.
      sys_time end = std::max(now, last);
      if (recorded->last_end && *recorded->last_end >= recorded->last_fire)
        end = *recorded->last_end;
      candidate_ = end + every->period;
    }
    return;
  }
  const auto& cron = std::get<cron_trigger>(when_);
  if (recorded) {
    last_fire_ = recorded->last_fire;
    candidate_ = cron.expression.next(recorded->last_fire);
  } else {
    candidate_ = cron.expression.next(now);
  }
}

std::optional<sys_time> schedule_plan::after(sys_time slot) const {
  if (const auto* every = std::get_if<every_trigger>(&when_)) return slot + every->period;
  return std::get<cron_trigger>(when_).expression.next(slot);
}

sys_time schedule_plan::latest_due(sys_time first, sys_time now) const {
  if (const auto* every = std::get_if<every_trigger>(&when_)) {
    const auto period = std::chrono::duration_cast<sys_time::duration>(every->period);
    return first + ((now - first) / period) * period;
  }
  const auto& expr = std::get<cron_trigger>(when_).expression;
  // Find a due slot close to `now` first, so that a long outage of a frequent cron schedule
  // does not walk through every missed second.
  sys_time latest = first;
  using namespace std::chrono_literals;
  static constexpr std::array<std::chrono::seconds, 7> windows{
      1s, 60s, 3600s, 86400s, 7 * 86400s, 32 * 86400s, 367 * 86400s};
  for (auto w : windows) {
    const sys_time from = now - w;
    if (from <= first) break;
    if (auto n = expr.next(from - std::chrono::nanoseconds{1}); n && *n <= now) {
      latest = *n;
      break;
    }
  }
  while (auto n = expr.next(latest)) {
    if (*n > now) break;
    latest = *n;
  }
  return latest;
}

decision schedule_plan::due(sys_time now) const {
  decision d;
  if (awaiting_end_ || !candidate_) return d;
  const sys_time first = *candidate_;
  if (first > now) {
    d.wake = first;
    return d;
  }
  const sys_time latest = latest_due(first, now);
  // Due while we lead (or just before): a regular fire, however late the timer woke.
  if (latest >= leader_since_ - active_window_) {
    d.what = decision::start;
    d.slot = latest;
    return d;
  }
  d.missed_since = first;
  if (policy_ == misfire_policy::run_once) {
    d.what = decision::start;
    d.slot = latest;
    d.catch_up = true;
    return d;
  }
  d.dropped = true;
  d.wake = after(latest);
  return d;
}

decision schedule_plan::decide(sys_time now, bool running, std::chrono::nanoseconds lease_left,
                               milliseconds stop_grace) {
  auto d = due(now);
  std::optional<sys_time> dropped_since;
  if (d.dropped) {
    dropped_since = d.missed_since;
    drop_missed(now);
    d = due(now);
  }
  d.dropped = dropped_since.has_value();
  if (d.what == decision::start && running) {
    skipped(d.slot);
    d.what = decision::skip_overlap;
    d.wake = next_fire();
  } else if (d.what == decision::start && lease_left <= stop_grace) {
    d.what = decision::defer;
  }
  // Only a start reports its own catch-up; anything else reports the dropped fires, if any.
  if (d.what != decision::start || !d.catch_up) {
    d.catch_up = false;
    d.missed_since = dropped_since;
  }
  return d;
}

void schedule_plan::fired(sys_time slot) {
  last_fire_ = slot;
  const auto* every = std::get_if<every_trigger>(&when_);
  if (every && every->mode == every_mode::fixed_delay) {
    awaiting_end_ = true;
    candidate_.reset();
    return;
  }
  candidate_ = after(slot);
}

void schedule_plan::skipped(sys_time slot) { candidate_ = after(slot); }

void schedule_plan::drop_missed(sys_time now) {
  if (awaiting_end_ || !candidate_ || *candidate_ > now) return;
  candidate_ = after(latest_due(*candidate_, now));
}

void schedule_plan::run_ended(sys_time end) {
  const auto* every = std::get_if<every_trigger>(&when_);
  if (!awaiting_end_ || !every) return;
  awaiting_end_ = false;
  candidate_ = end + every->period;
}

bool may_start(steady_time lease_deadline, steady_time now, milliseconds stop_grace) {
  return lease_deadline - now > stop_grace;
}

steady_time stop_point(steady_time lease_deadline, milliseconds stop_grace) {
  return lease_deadline - stop_grace;
}

milliseconds stop_grace_limit(const contend_options& lease) {
  return lease.transition - lease.effective_drift_margin();
}

milliseconds default_stop_grace(const contend_options& lease) {
  return std::max(milliseconds{0}, std::min(milliseconds{3000}, stop_grace_limit(lease) / 2));
}

}  // namespace baton::detail
