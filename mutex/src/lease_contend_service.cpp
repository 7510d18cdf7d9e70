// The generic contend service over a lease_store: the asio driver of detail::lease_machine.
#include <algorithm>
#include <atomic>
#include <boost/asio/defer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <future>
#include <mutex>
#include <optional>

#include "baton/mutex/detail/lease_machine.hpp"
#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/errc.hpp"
#include "baton/mutex/lease_store.hpp"
#include "baton/mutex/metrics.hpp"

namespace baton {
namespace {

using steady = std::chrono::steady_clock;

class lease_contend_service final : public contend_service {
  std::shared_ptr<lease_contend_service> shared() {
    return std::static_pointer_cast<lease_contend_service>(shared_from_this());
  }

  // Runs a store completion on our strand. Completions are deferred: from an io thread the
  // continuation is queued on that same thread (no wake-up of another one), and it still runs
  // after the store's handler, never inside it.
  template <class Handler>
  auto wrap(Handler handler) {
    return [self = shared(), handler = std::move(handler)](auto&&... args) mutable {
      boost::asio::defer(self->get_executor(),
                         [handler = std::move(handler), ... args = std::forward<decltype(args)>(
                                                            args)]() mutable { handler(args...); });
    };
  }

 public:
  lease_contend_service(boost::asio::io_context& io, std::shared_ptr<lease_store> store,
                        std::string name, std::string id,
                        std::shared_ptr<mutex_contender> contender, contend_options options,
                        random_source random, std::string backend_type)
      : contend_service(io, std::move(name), std::move(id), std::move(contender), options,
                        std::move(backend_type)),
        store_(std::move(store)),
        random_(std::move(random)),
        machine_(contender_id(), options, random_),
        attempt_timer_(get_executor()),
        lease_timer_(get_executor()),
        adopt_timer_(get_executor()) {}

  ~lease_contend_service() override {
    if (watch_ != 0) store_->unwatch(watch_);
  }

  // The blocking path (baton::locker): the first acquire and the release go from the caller's
  // thread. A lease won there is "held" until the strand takes it over (adopt_due(), at most
  // adopt_delay() later): a lock released before that never costs the io threads anything.
  start_result start_blocking(bool one_round) override {
    // After a stop_blocking() that released on this thread only its cleanup on the strand may
    // be left: the backend is done with that lease, so the next acquire need not wait for it.
    const bool after_fast_stop = fast_stop_at_.load() == starts();
    if ((status() != service_status::initial && !after_fast_stop) || clock_refused())
      return contend_service::start_blocking(one_round);
    const auto sent = steady::now();
    const auto sent_wall = std::chrono::system_clock::now();
    std::error_code ec;
    lease_grant grant;
    const bool tried = store_->acquire_blocking(mutex_name(), contender_id(), options().ttl,
                                                options().transition, ec, grant);
    const bool won = tried && !ec && grant.owner.is(contender_id());
    if (after_fast_stop && !wait_initial(options().lease())) {
      if (won) give_back();
      return start_result::refused;
    }
    if (!tried || ec) return contend_service::start_blocking(one_round);
    // As lease_machine::on_reply: the lease counts from when the request was sent.
    const auto deadline =
        sent + (grant.owner.transition_at - grant.now) - options().effective_drift_margin();
    if (won && deadline > steady::now()) {
      if (!claim_start()) {
        give_back();
        return start_result::refused;
      }
      set_owner_snapshot(grant.owner, deadline);
      detail::record_lease_event(backend_type(), lease_event::acquired);
      bool arm = false;
      {
        std::lock_guard lock(here_mutex_);
        adoption_ = adoption{std::move(grant), sent, sent_wall};
        held_ = term::held;
        arm = !adopt_armed_;
        adopt_armed_ = true;
      }
      if (arm) arm_adoption();
      return start_result::owner;
    }
    if (one_round && !won) {
      // The request joined the queue: leave it, as a stopped service does.
      give_back();
      return start_result::not_owner;
    }
    return contend_service::start_blocking(one_round);
  }

  bool stop_blocking(std::chrono::milliseconds timeout) noexcept override {
    try {
      bool here = false;          // the release goes from this thread
      bool strand_knows = false;  // an adopted lease: the strand renews it and must clean up
      {
        // attempt() checks the status under the same lock before it sends: once claimed, no
        // renewal of this lease reaches the backend after the release below.
        std::lock_guard lock(here_mutex_);
        if (held_ == term::held) {
          here = unclaim_start();
        } else if (held_ == term::adopted && !on_wire_ && is_owner() && claim_stop()) {
          here = strand_knows = true;
        }
        if (here) held_ = term::none;
      }
      if (!here) return contend_service::stop_blocking(timeout);
      clear_owner_snapshot();
      std::error_code ec;
      bool released = false;
      const bool tried = store_->release_blocking(mutex_name(), contender_id(), ec, released);
      if (!tried || ec) {
        // No blocking path now, or it failed (a connection the server closed, say): the usual
        // release, waited for. Releasing twice is harmless: a release names its contender.
        if (ec)
          detail::log({.schedule = mutex_name(), .event = "lease.release_failed"})
              .debug("blocking release failed ({}); releasing the usual way", ec.message());
        if (!strand_knows) {
          detail::record_lease_event(backend_type(), lease_event::released);
          return release_and_wait(timeout);
        }
        auto promise = std::make_shared<std::promise<void>>();
        auto future = promise->get_future();
        stop_claimed([promise] { promise->set_value(); });
        return future.wait_for(timeout) == std::future_status::ready;
      }
      const bool lost = !released;
      if (lost)
        detail::log({.schedule = mutex_name(), .event = "lease.lost"})
            .warn("released a lease the backend no longer gave '{}': it had been lost",
                  contender_id());
      if (!strand_knows) {
        detail::record_lease_event(backend_type(),
                                   lost ? lease_event::lost : lease_event::released);
        return true;
      }
      released_here_ = true;
      fast_stop_at_ = starts();
      stop_claimed({}, lost ? release_reason::lost : release_reason::released);
      return true;
    } catch (...) {
      return false;
    }
  }

  void async_read_state(state_handler handler) override {
    store_->async_read_state(mutex_name(), wrap(std::move(handler)));
  }

  void async_write_state(std::string bytes, done_handler handler) override {
    boost::asio::post(get_executor(), [self = shared(), bytes = std::move(bytes),
                                       handler = std::move(handler)]() mutable {
      if (!self->is_owner()) {
        handler(make_error_code(errc::not_owner));
        return;
      }
      // fence(), not the strand's: a lease won by start_blocking() may not be taken over yet.
      self->store_->async_write_state(self->mutex_name(), self->contender_id(), self->fence(),
                                      std::move(bytes), self->wrap(std::move(handler)));
    });
  }

 protected:
  void start_contend(std::uint64_t generation) override {
    machine_ = detail::lease_machine(contender_id(), options(), random_);
    if (adopting_) {
      // start_blocking() won the lease on the caller's thread: take it over as if the request
      // had gone from here (its acquired event is counted already).
      adopting_ = false;
      adoption taken;
      {
        std::lock_guard lock(here_mutex_);
        taken = adoption_;
      }
      machine_.on_send(taken.sent);
      sent_wall_ = taken.sent_wall;
      counted_ = true;
      on_acquire_done(generation, {}, taken.grant);
      counted_ = false;
      if (!machine_.leader()) {
        // Its lease ran out before the strand got to it.
        clear_owner_snapshot();
        detail::record_lease_event(backend_type(), lease_event::step_down);
      }
      return;
    }
    attempt(generation);
  }

  void stop_contend(std::uint64_t generation, std::function<void()> done) noexcept override {
    attempt_timer_.cancel();
    lease_timer_.cancel();
    if (watch_ != 0) store_->unwatch(watch_);
    watch_ = 0;
    watching_ = false;
    machine_.on_stop();  // the base class already told the contender
    {
      // Stopped (stop(), not stop_blocking()) before the strand took over a lease won by
      // start_blocking(): released below.
      std::lock_guard lock(here_mutex_);
      if (held_ == term::held) {
        clear_owner_snapshot();
        detail::record_lease_event(backend_type(), lease_event::released);
      }
      held_ = term::none;
    }
    if (adopting_) {
      // Adopted, but stopped before its start step ran: the base class never told the
      // contender, so this is the end of the lease counted at start_blocking().
      adopting_ = false;
      clear_owner_snapshot();
      detail::record_lease_event(backend_type(), lease_event::released);
    }
    if (released_here_.exchange(false)) {
      done();  // stop_blocking() released it on the caller's thread
      return;
    }
    if (machine_.in_flight()) {
      // Release only after the request in flight is answered, or it could win afterwards.
      pending_stop_ = std::move(done);
      return;
    }
    release(std::move(done));
  }

 private:
  // Asks the store for wake-ups for this start; true (the watch is new) when it gave a handle.
  bool watch(std::uint64_t generation) {
    watching_ = true;
    std::weak_ptr<lease_contend_service> weak = shared();
    watch_ =
        store_->watch(mutex_name(), contender_id(), options().poll_interval, [weak, generation] {
          if (auto self = weak.lock())
            boost::asio::defer(self->get_executor(), [self, generation] {
              if (!self->current(generation)) return;
              const auto now = steady::now();
              self->machine_.on_wakeup(now);
              // Due now: ask at once rather than through a timer (one reactor cycle less).
              if (now >= self->machine_.next_attempt() && !self->machine_.in_flight())
                self->attempt(generation);
              else
                self->schedule(generation);
            });
        });
    return watch_ != 0;
  }

  void attempt(std::uint64_t generation) {
    if (machine_.in_flight()) return;
    {
      std::lock_guard lock(here_mutex_);
      if (!current(generation)) return;  // stop_blocking() claimed the stop meanwhile
      on_wire_ = true;
    }
    machine_.on_send(steady::now());
    sent_wall_ = std::chrono::system_clock::now();
    auto done = [self = shared(), generation](std::error_code ec, lease_grant grant) {
      boost::asio::defer(self->get_executor(), [self, generation, ec, grant = std::move(grant)] {
        self->on_acquire_done(generation, ec, grant);
      });
    };
    // A node whose clock is too far off the backend's only reads (which measures the offset
    // again) until it is back within max_clock_offset.
    if (clock_refused())
      store_->async_read(mutex_name(), std::move(done));
    else
      store_->async_acquire(mutex_name(), contender_id(), options().ttl, options().transition,
                            std::move(done));
  }

  void on_acquire_done(std::uint64_t generation, std::error_code ec, const lease_grant& grant) {
    {
      std::lock_guard lock(here_mutex_);
      on_wire_ = false;
    }
    if (!current(generation)) {
      // A completion of an earlier start: it changes nothing, but a stop waits for it. One of
      // this start that stop() overtook (lifecycle already stopping) is no longer in flight,
      // or stop_contend() would wait for it forever.
      if (generation == this->generation()) (void)machine_.on_error(steady::now());
      if (pending_stop_) {
        auto done = std::move(pending_stop_);
        pending_stop_ = nullptr;
        release(std::move(done));
      }
      return;
    }
    const auto now = steady::now();
    const bool was_leader = machine_.leader();
    std::vector<detail::lease_machine::notification> notes;
    if (ec) {
      if (machine_.consecutive_errors() == 0 || machine_.leader())
        detail::log({.schedule = mutex_name(), .event = "lease.request_failed"})
            .warn("lease request failed: {}", ec.message());
      notes = machine_.on_error(now);
    } else {
      // Wake-ups are asked for only once somebody else holds the mutex: an uncontended owner
      // costs the backend nothing for them. A wake-up may be missed until the new watch is in
      // place, so the first wait after it is at most poll_interval. What the wake-ups cover
      // may change while the store runs (SQL: batched polling).
      const bool new_watch = !watching_ && !grant.owner.is(contender_id()) && watch(generation);
      machine_.set_wakeups(watch_ != 0 && !new_watch ? store_->wakeups() : wakeup_coverage::none);
      if (grant.now != backend_time{})
        note_backend_clock(grant.now, sent_wall_, std::chrono::system_clock::now());
      if (clock_refused()) {
        notes = machine_.on_refused(now, grant);
        // Won before the offset was known (the first reply measures it; nothing ran): give it
        // back. An owner that only now finds its clock off steps down and lets its lease lapse
        // instead: its jobs, asked to stop now, are gone before transition_at (kill_grace <=
        // stop_grace < transition), so the next owner never overlaps them.
        if (!was_leader && grant.owner.is(contender_id())) release({});
      } else {
        notes = machine_.on_reply(now, grant);
      }
    }
    deliver(notes);
    // Owner before and after, same term: a renewal succeeded.
    if (!ec && was_leader && notes.empty() && machine_.leader()) extend_lease(machine_.deadline());
    if (ec)
      notify_error(ec);
    else
      notify_observed(grant.owner);
    if (current(generation)) schedule(generation);
  }

  void deliver(const std::vector<detail::lease_machine::notification>& notes) {
    for (const auto& n : notes) {
      if (n.acquired)
        notify_acquired(n.state, machine_.deadline(), counted_);
      else
        notify_released(n.state, n.why);
    }
  }

  void schedule(std::uint64_t generation) {
    std::weak_ptr<lease_contend_service> weak = shared();
    attempt_timer_.expires_at(machine_.next_attempt());
    attempt_timer_.async_wait([weak, generation](boost::system::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || !self->current(generation)) return;
      // Timer cancellation is racy: act only if the attempt is really due.
      if (steady::now() < self->machine_.next_attempt()) return self->schedule(generation);
      self->attempt(generation);
    });
    if (machine_.leader()) {
      lease_timer_.expires_at(machine_.deadline());
      lease_timer_.async_wait([weak, generation](boost::system::error_code ec) {
        auto self = weak.lock();
        if (ec || !self || !self->current(generation)) return;
        auto notes = self->machine_.on_tick(steady::now());
        if (notes.empty()) return;
        detail::log({.schedule = self->mutex_name(), .event = "lease.expired"})
            .warn("the local lease ran out: stepping down");
        self->deliver(notes);
      });
    }
  }

  void release(std::function<void()> done) {
    store_->async_release(
        mutex_name(), contender_id(),
        [self = shared(), done = std::move(done)](std::error_code ec) {
          if (ec)
            detail::log({.schedule = self->mutex_name(), .event = "lease.release_failed"})
                .warn("release failed: {}", ec.message());
          boost::asio::defer(self->get_executor(), [done] {
            if (done) done();
          });
        });
  }

  // A lease won on the caller's thread, or a release sent from there, without a hop to the strand.
  void give_back() {
    std::error_code ec;
    bool released = false;
    if (!store_->release_blocking(mutex_name(), contender_id(), ec, released))
      store_->async_release(mutex_name(), contender_id(), [](std::error_code) {});
  }

  // The strand takes a held lease over this long after it was won at the latest: well before
  // its first renewal is due (from half the ttl on), and rarely enough to cost nothing.
  std::chrono::milliseconds adopt_delay() const {
    return std::clamp(options().ttl / 20, std::chrono::milliseconds{1},
                      std::chrono::milliseconds{100});
  }

  // From the caller's thread, only while adopt_armed_ was false: arming a timer does not wake
  // an io thread (a post would).
  void arm_adoption() {
    adopt_timer_.expires_after(adopt_delay());
    adopt_timer_.async_wait(
        [weak = std::weak_ptr<lease_contend_service>(shared())](boost::system::error_code) {
          if (auto self = weak.lock()) self->adopt_due();
        });
  }

  // On the strand: a lease still held (not given up by stop_blocking()) becomes the strand's,
  // as if start() had won it.
  void adopt_due() {
    bool adopt = false;
    {
      std::lock_guard lock(here_mutex_);
      adopt_armed_ = false;
      if (held_ == term::held && status() == service_status::starting) {
        held_ = term::adopted;
        adopt = true;
      }
    }
    if (!adopt) return;
    adopting_ = true;
    start_claimed();
  }

  // The usual release of a lease the strand never heard of, waited for.
  bool release_and_wait(std::chrono::milliseconds timeout) {
    auto promise = std::make_shared<std::promise<void>>();
    auto future = promise->get_future();
    store_->async_release(mutex_name(), contender_id(),
                          [promise](std::error_code) { promise->set_value(); });
    return future.wait_for(timeout) == std::future_status::ready;
  }

  struct adoption {
    lease_grant grant;
    steady::time_point sent;
    std::chrono::system_clock::time_point sent_wall;
  };

  std::shared_ptr<lease_store> store_;
  random_source random_;
  detail::lease_machine machine_;
  boost::asio::steady_timer attempt_timer_;
  boost::asio::steady_timer lease_timer_;
  std::uint64_t watch_ = 0;  // the store's handle, 0 when none
  bool watching_ = false;    // watch() was asked in this start
  std::function<void()> pending_stop_;
  std::chrono::system_clock::time_point sent_wall_{};  // wall clock when the request was sent
  // start_blocking() and stop_blocking() on the caller's thread, and the strand:
  enum class term { none, held, adopted };  // a lease won by start_blocking()
  std::mutex here_mutex_;                   // guards the fields up to adopt_armed_
  bool on_wire_ = false;                    // an acquire/renew/read of this service is unanswered
  term held_ = term::none;
  adoption adoption_;         // the lease start_blocking() won last
  bool adopt_armed_ = false;  // adopt_timer_ waits (armed from the caller's thread)
  boost::asio::steady_timer adopt_timer_;
  bool adopting_ = false;  // strand: the next start_contend() takes adoption_ over
  bool counted_ = false;   // strand: notify_acquired() of an adopted lease (counted already)
  std::atomic<bool> released_here_{false};  // the next stop_contend() has nothing to release
  // starts() when stop_blocking() last released on the caller's thread (no start since: only
  // that stop's cleanup may be left)
  std::atomic<std::uint64_t> fast_stop_at_{~std::uint64_t{0}};
};

}  // namespace

std::shared_ptr<contend_service> make_lease_contend_service(
    boost::asio::io_context& io, std::shared_ptr<lease_store> store, std::string name,
    std::string contender_id, std::shared_ptr<mutex_contender> contender, contend_options options,
    random_source random, std::string backend_type) {
  return std::make_shared<lease_contend_service>(
      io, std::move(store), std::move(name), std::move(contender_id), std::move(contender), options,
      std::move(random), std::move(backend_type));
}

}  // namespace baton
