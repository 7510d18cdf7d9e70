#include "baton/mutex/detail/lease_machine.hpp"

#include <algorithm>
#include <utility>

namespace baton::detail {

using std::chrono::milliseconds;

lease_machine::lease_machine(std::string self, contend_options options, random_source random)
    : self_(std::move(self)),
      options_(options),
      random_(random ? random : default_random_source()),
      period_(options, std::move(random)) {}

lease_machine::time_point lease_machine::on_grid(time_point t, milliseconds ttl) {
  const milliseconds grid = std::clamp(ttl / 100, milliseconds{1}, milliseconds{100});
  const auto since = t.time_since_epoch();
  auto rest = since % grid;
  if (rest < since.zero()) rest += grid;
  return time_point{since - rest};
}

milliseconds lease_machine::renewal_spread(milliseconds ttl, bool wide) const {
  const milliseconds window = wide ? ttl / 2 : ttl / 20;
  if (window <= milliseconds::zero()) return milliseconds::zero();
  // A random source that ignores the range (tests) still stays inside the window.
  return std::clamp(milliseconds{random_(0, window.count() + 1)}, milliseconds::zero(), window);
}

void lease_machine::on_send(time_point now) {
  in_flight_ = true;
  woken_in_flight_ = false;  // this request sees whatever the wake-up announced
  sent_at_ = now;
}

lease_machine::notification lease_machine::step_down(mutex_owner after, release_reason why) {
  notification n{false, mutex_state{known_, std::move(after), self_}, why};
  n.state.before.owner_id = self_;
  leader_ = false;
  return n;
}

std::vector<lease_machine::notification> lease_machine::on_reply(time_point now,
                                                                 const lease_grant& grant) {
  std::vector<notification> notes;
  in_flight_ = false;
  const bool woken = std::exchange(woken_in_flight_, false);
  const bool after_error = errors_ != 0;
  errors_ = 0;
  const mutex_owner& after = grant.owner;

  if (after.is(self_)) {
    // The lease counts from when the request was sent: the backend granted it no earlier.
    const auto granted = after.transition_at - grant.now;
    const time_point deadline = sent_at_ + granted - options_.effective_drift_margin();
    // Owner again under a new fence: the ownership we had ended on the backend meanwhile.
    if (leader_ && after.fence != known_.fence)
      notes.push_back(step_down(after, release_reason::lost));
    if (deadline <= now) {
      // The reply came too late to act on: not owner locally; ask again at once.
      if (leader_) notes.push_back(step_down(mutex_owner{}, release_reason::step_down));
      known_ = mutex_owner{};
      next_attempt_ = now;
      return notes;
    }
    const bool new_term = !leader_;
    if (new_term) {
      notes.push_back(notification{true, mutex_state{known_, after, self_}});
      leader_ = true;
    }
    known_ = after;
    deadline_ = deadline;
    const auto ttl = std::chrono::duration_cast<milliseconds>(after.ttl_at - grant.now);
    next_attempt_ =
        std::max(now, on_grid(sent_at_ + ttl - renewal_spread(ttl, new_term || after_error), ttl));
    return notes;
  }

  if (leader_) notes.push_back(step_down(after, release_reason::lost));
  known_ = after;
  next_attempt_ = now + period_.next_delay(after, self_, grant.now, wakeups_);
  // The long safeguard wait of a waiter the backend wakes: on the grid too.
  if (wakeups_ == wakeup_coverage::release_and_expiry)
    next_attempt_ = std::max(now, on_grid(next_attempt_, options_.ttl));
  // Woken while the request was out: the reply may predate the release it announced.
  if (woken) next_attempt_ = now;
  return notes;
}

std::vector<lease_machine::notification> lease_machine::on_refused(time_point now,
                                                                   const lease_grant& grant) {
  std::vector<notification> notes;
  in_flight_ = false;
  woken_in_flight_ = false;
  errors_ = 0;
  if (leader_) notes.push_back(step_down(mutex_owner{}, release_reason::step_down));
  known_ = grant.owner.is(self_) ? mutex_owner{} : grant.owner;
  next_attempt_ = now + std::max(options_.retry_period, options_.poll_interval);
  return notes;
}

std::vector<lease_machine::notification> lease_machine::on_error(time_point now) {
  in_flight_ = false;
  woken_in_flight_ = false;  // the backoff stands: a failing backend is not asked at once
  ++errors_;
  if (leader_) {
    // Keep trying to renew every retry_period until the local lease runs out.
    next_attempt_ = now + options_.retry_period;
  } else {
    auto backoff = options_.retry_period;
    for (unsigned i = 1; i < errors_ && backoff < options_.max_backoff; ++i) backoff *= 2;
    next_attempt_ = now + std::min(backoff, options_.max_backoff);
  }
  return on_tick(now);
}

std::vector<lease_machine::notification> lease_machine::on_tick(time_point now) {
  std::vector<notification> notes;
  if (leader_ && now >= deadline_) {
    notes.push_back(step_down(mutex_owner{}, release_reason::step_down));
    known_ = mutex_owner{};
  }
  return notes;
}

void lease_machine::on_wakeup(time_point now) {
  if (leader_) return;
  next_attempt_ = std::min(next_attempt_, now);
  // The reply to the request out now sets the next attempt: it must not undo this one.
  if (in_flight_) woken_in_flight_ = true;
}

std::vector<lease_machine::notification> lease_machine::on_stop() {
  std::vector<notification> notes;
  if (leader_) notes.push_back(step_down(mutex_owner{}, release_reason::released));
  known_ = mutex_owner{};
  return notes;
}

}  // namespace baton::detail
