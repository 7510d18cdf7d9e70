#include "baton/mutex/contend_service.hpp"

#include <boost/asio/post.hpp>
#include <future>

#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/metrics.hpp"
#include "baton/mutex/names.hpp"

namespace baton {

contend_service::contend_service(boost::asio::io_context& io, std::string name,
                                 std::string contender_id,
                                 std::shared_ptr<mutex_contender> contender,
                                 contend_options options, std::string backend_type)
    : strand_(boost::asio::make_strand(io)),
      name_(std::move(name)),
      id_(contender_id.empty() ? make_contender_id() : std::move(contender_id)),
      contender_(contender),
      options_(options),
      backend_type_(std::move(backend_type)) {
  validate_mutex_name(name_);
  validate(options_);
}

contend_service::~contend_service() = default;

bool contend_service::start() {
  if (!claim_start()) return false;
  start_claimed();
  return true;
}

bool contend_service::claim_start() noexcept {
  auto expected = service_status::initial;
  if (!status_.compare_exchange_strong(expected, service_status::starting)) return false;
  ++starts_;
  return true;
}

void contend_service::start_claimed() {
  boost::asio::post(strand_, [self = shared_from_this()] {
    auto expected = service_status::starting;
    if (!self->status_.compare_exchange_strong(expected, service_status::running)) return;
    ++self->generation_;
    self->start_contend(self->generation_);
  });
}

bool contend_service::unclaim_start() noexcept {
  {
    std::lock_guard lock(initial_mutex_);
    auto expected = service_status::starting;
    if (!status_.compare_exchange_strong(expected, service_status::initial)) return false;
  }
  initial_.notify_all();
  return true;
}

bool contend_service::claim_stop() noexcept {
  auto status = status_.load();
  while (status == service_status::starting || status == service_status::running)
    if (status_.compare_exchange_weak(status, service_status::stopping)) return true;
  return false;
}

void contend_service::stop(std::function<void()> done) noexcept {
  try {
    if (!claim_stop()) {
      // Not running (or already stopping): nothing to release here.
      if (done) boost::asio::post(strand_, std::move(done));
      return;
    }
    stop_claimed(std::move(done));
  } catch (const std::exception& e) {
    detail::log({.schedule = name_, .event = "lease.stop_failed"})
        .error("stop failed: {}", e.what());
  }
}

void contend_service::stop_claimed(std::function<void()> done, release_reason why) {
  boost::asio::post(strand_, [self = shared_from_this(), done = std::move(done), why]() mutable {
    // A start() that never ran its strand step has nothing to stop.
    auto finish = [self, done = std::move(done)] {
      {
        std::lock_guard lock(self->initial_mutex_);
        self->status_.store(service_status::initial);
      }
      self->initial_.notify_all();
      if (done) done();
    };
    if (self->leader_) {
      mutex_state state{self->last_observed(), mutex_owner{}, self->id_};
      state.before.owner_id = self->id_;
      self->notify_released(state, why);
    }
    self->stop_contend(self->generation_, std::move(finish));
  });
}

bool contend_service::wait_initial(std::chrono::milliseconds timeout) {
  std::unique_lock lock(initial_mutex_);
  return initial_.wait_for(lock, timeout,
                           [&] { return status_.load() == service_status::initial; });
}

contend_service::start_result contend_service::start_blocking(bool one_round) {
  return start() ? start_result::started : start_result::refused;
}

bool contend_service::stop_blocking(std::chrono::milliseconds timeout) noexcept {
  return stop_and_wait(timeout);
}

void contend_service::set_owner_snapshot(const mutex_owner& owner, steady_time deadline) {
  std::lock_guard lock(snapshot_mutex_);
  owner_ = true;
  fence_ = owner.fence;
  deadline_ = deadline;
  observed_ = owner;
}

void contend_service::clear_owner_snapshot() {
  std::lock_guard lock(snapshot_mutex_);
  owner_ = false;
  fence_ = 0;
}

bool contend_service::stop_and_wait(std::chrono::milliseconds timeout) noexcept {
  try {
    if (strand_.running_in_this_thread()) {
      stop();
      return false;
    }
    auto promise = std::make_shared<std::promise<void>>();
    auto future = promise->get_future();
    stop([promise] { promise->set_value(); });
    return future.wait_for(timeout) == std::future_status::ready;
  } catch (...) {
    return false;
  }
}

void contend_service::restart() noexcept {
  stop([weak = weak_from_this()] {
    if (auto self = weak.lock()) self->start();
  });
}

void contend_service::set_deadline_source(std::function<steady_time()> source) {
  deadline_source_ = std::move(source);
}

bool contend_service::is_owner() const noexcept {
  const auto deadline = lease_deadline();
  return deadline != steady_time{} && std::chrono::steady_clock::now() < deadline;
}

std::uint64_t contend_service::fence() const noexcept {
  std::lock_guard lock(snapshot_mutex_);
  return owner_ ? fence_ : 0;
}

contend_service::steady_time contend_service::lease_deadline() const noexcept {
  steady_time deadline{};
  {
    std::lock_guard lock(snapshot_mutex_);
    if (!owner_) return steady_time{};
    deadline = deadline_;
  }
  // Outside the lock: the source takes its own.
  if (deadline_source_) {
    try {
      deadline = deadline_source_();
    } catch (...) {
      return steady_time{};  // unknown: not owner
    }
  }
  return deadline;
}

mutex_owner contend_service::last_observed() const {
  std::lock_guard lock(snapshot_mutex_);
  return observed_;
}

std::optional<clock_sample> contend_service::clock_offset() const {
  std::lock_guard lock(snapshot_mutex_);
  return clock_;
}

bool contend_service::clock_refused() const {
  std::lock_guard lock(snapshot_mutex_);
  return clock_refused_;
}

void contend_service::note_backend_clock(backend_time backend_now,
                                         std::chrono::system_clock::time_point sent,
                                         std::chrono::system_clock::time_point received) {
  using std::chrono::milliseconds;
  const auto sample = estimate_clock_offset(backend_now, sent, received);
  const bool refused = clock_offset_exceeds(sample, options_.max_clock_offset);
  bool was_refused = false;
  {
    std::lock_guard lock(snapshot_mutex_);
    clock_ = sample;
    was_refused = clock_refused_;
    clock_refused_ = refused;
  }
  detail::record_clock_offset(backend_type_, sample.offset);
  const auto seconds = [](milliseconds d) { return static_cast<double>(d.count()) / 1000.0; };
  // Logged when it surely moved by more than 1 s: with 100,000 leases renewed in a wave, replies
  // can take seconds, and each such sample (uncertainty = half the round trip) would otherwise
  // log a warning per mutex.
  if (clock_offset_moved(sample, clock_logged_, milliseconds{1000})) {
    clock_logged_ = sample.offset;
    detail::log({.schedule = name_, .event = "clock.offset"})
        .warn(
            "this host's clock is {:+.3f} s off the backend's (local minus backend, ±{:.3f} s); "
            "fire times follow the backend's clock",
            -seconds(sample.offset), seconds(sample.uncertainty));
  }
  if (refused && !was_refused)
    detail::log({.schedule = name_, .event = "clock.refused"})
        .error(
            "refusing to lead: this host's clock is {:+.3f} s off the backend's, beyond "
            "max_clock_offset {:.3f} s",
            -seconds(sample.offset), seconds(options_.max_clock_offset));
  else if (!refused && was_refused)
    detail::log({.schedule = name_, .event = "clock.accepted"})
        .info("this host's clock is back within max_clock_offset ({:+.3f} s off the backend's)",
              -seconds(sample.offset));
}

void contend_service::notify_acquired(const mutex_state& state, steady_time deadline,
                                      bool counted) {
  if (leader_) return;
  leader_ = true;
  if (!counted) detail::record_lease_event(backend_type_, lease_event::acquired);
  {
    std::lock_guard lock(snapshot_mutex_);
    owner_ = true;
    fence_ = state.after.fence;
    deadline_ = deadline;
    observed_ = state.after;
  }
  detail::log({.schedule = name_, .event = "mutex.acquired", .fence = state.after.fence})
      .debug("mutex acquired by '{}', fence {}", id_, state.after.fence);
  if (auto c = contender_.lock()) {
    try {
      c->on_acquired(state);
    } catch (const std::exception& e) {
      detail::log({.schedule = name_, .event = "mutex.callback_threw"})
          .error("on_acquired threw: {}", e.what());
    } catch (...) {
      detail::log({.schedule = name_, .event = "mutex.callback_threw"}).error("on_acquired threw");
    }
  }
}

void contend_service::extend_lease(steady_time deadline) {
  if (!leader_) return;
  detail::record_lease_event(backend_type_, lease_event::renewed);
  std::lock_guard lock(snapshot_mutex_);
  deadline_ = deadline;
}

namespace {
lease_event event_of(release_reason why) noexcept {
  switch (why) {
    case release_reason::lost:
      return lease_event::lost;
    case release_reason::step_down:
      return lease_event::step_down;
    case release_reason::released:
      break;
  }
  return lease_event::released;
}
}  // namespace

void contend_service::notify_released(const mutex_state& state, release_reason why) {
  if (!leader_) return;
  leader_ = false;
  detail::record_lease_event(backend_type_, event_of(why));
  {
    std::lock_guard lock(snapshot_mutex_);
    owner_ = false;
    fence_ = 0;
  }
  detail::log({.schedule = name_, .event = "mutex.released", .fence = state.before.fence})
      .debug("mutex released by '{}', fence {}", id_, state.before.fence);
  if (auto c = contender_.lock()) {
    try {
      c->on_released(state);
    } catch (const std::exception& e) {
      detail::log({.schedule = name_, .event = "mutex.callback_threw"})
          .error("on_released threw: {}", e.what());
    } catch (...) {
      detail::log({.schedule = name_, .event = "mutex.callback_threw"}).error("on_released threw");
    }
  }
}

void contend_service::notify_observed(const mutex_owner& owner) {
  {
    std::lock_guard lock(snapshot_mutex_);
    observed_ = owner;
  }
  if (auto c = contender_.lock()) {
    try {
      c->on_observed(owner);
    } catch (...) {
      detail::log({.schedule = name_, .event = "mutex.callback_threw"}).error("on_observed threw");
    }
  }
}

void contend_service::notify_error(std::error_code ec) {
  if (auto c = contender_.lock()) {
    try {
      c->on_error(ec);
    } catch (...) {
      detail::log({.schedule = name_, .event = "mutex.callback_threw"}).error("on_error threw");
    }
  }
}

}  // namespace baton
