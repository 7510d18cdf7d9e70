// The generic contend service over a lease_store: the asio driver of detail::lease_machine.
#include <boost/asio/defer.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <optional>

#include "baton/mutex/detail/lease_machine.hpp"
#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/errc.hpp"
#include "baton/mutex/lease_store.hpp"

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
        lease_timer_(get_executor()) {}

  ~lease_contend_service() override {
    if (watch_ != 0) store_->unwatch(watch_);
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
      self->store_->async_write_state(self->mutex_name(), self->contender_id(),
                                      self->machine_.fence(), std::move(bytes),
                                      self->wrap(std::move(handler)));
    });
  }

 protected:
  void start_contend(std::uint64_t generation) override {
    machine_ = detail::lease_machine(contender_id(), options(), random_);
    attempt(generation);
  }

  void stop_contend(std::uint64_t generation, std::function<void()> done) noexcept override {
    attempt_timer_.cancel();
    lease_timer_.cancel();
    if (watch_ != 0) store_->unwatch(watch_);
    watch_ = 0;
    watching_ = false;
    machine_.on_stop();  // the base class already told the contender
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
        notify_acquired(n.state, machine_.deadline());
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

  std::shared_ptr<lease_store> store_;
  random_source random_;
  detail::lease_machine machine_;
  boost::asio::steady_timer attempt_timer_;
  boost::asio::steady_timer lease_timer_;
  std::uint64_t watch_ = 0;  // the store's handle, 0 when none
  bool watching_ = false;    // watch() was asked in this start
  std::function<void()> pending_stop_;
  std::chrono::system_clock::time_point sent_wall_{};  // wall clock when the request was sent
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
