#include "baton/scheduler/scheduler.hpp"

#include "baton/scheduler/detail/balancer.hpp"
#include "baton/scheduler/detail/job_pool.hpp"

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <mutex>
#include <stdexcept>
#include <stop_token>
#include <thread>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/duration.hpp"
#include "baton/mutex/errc.hpp"
#include "baton/mutex/names.hpp"
#include "baton/scheduler/detail/schedule_plan.hpp"

namespace baton {

namespace detail {
namespace {

using std::chrono::milliseconds;

/// Longest single timer wait: a fire time is re-checked against the wall clock at least this
/// often, so a stepped wall clock moves a fire by at most this much.
constexpr milliseconds max_wait{60'000};
/// How long stop() waits for the backends to confirm the releases.
constexpr milliseconds release_wait{5'000};
/// How long stop() and remove() wait for the history records to be written before releasing.
constexpr milliseconds history_flush_wait{2'000};
/// With a push for control changes, the controls are still re-read this often (a lost push).
constexpr milliseconds controls_safety_interval{30'000};
/// Without a push for control changes (a store whose watch_controls() returns 0: a read-only
/// SQLite backend whose file does not exist yet, or another record_store; the SQL backend's
/// controls poll pushes on SQLite and MySQL) every leader re-reads its controls at the lease
/// poll_interval, but a node spends at most about this many reads per second on it: with many
/// schedules each re-reads less often (10,000 schedules: every 10 s), else the reads alone keep
/// a core busy (20,000 per second at 500 ms).
constexpr std::size_t controls_reads_per_second = 1000;
/// Most history records kept while the backend cannot take them (then the oldest are dropped).
constexpr std::size_t history_queue_bound = 32;
/// Longest error text kept in a history record.
constexpr std::size_t max_error_bytes = 1024;
/// A schedule is handed off only when no fire is due within this (balance).
constexpr milliseconds handoff_quiet_margin{250};

std::string fmt_time(sys_time t) { return format_rfc3339_utc(t); }

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

/// Drives one schedule: the contender of its mutex, its fire timer, its controls, its history
/// writes and its running job. All its state lives on its own strand; status() reads a snapshot
/// under a mutex.
class schedule_runner : public mutex_contender,
                        public balanced_schedule,
                        public std::enable_shared_from_this<schedule_runner> {
 public:
  schedule_runner(schedule_options s, contend_options lease, milliseconds stop_grace,
                  std::string contender_id, boost::asio::io_context& io,
                  std::shared_ptr<detail::job_pool> jobs,
                  std::shared_ptr<const scheduler_clock> clock, bool follow_backend_clock,
                  record_store& records, std::shared_ptr<const std::atomic<std::size_t>> schedules)
      : options_(std::move(s)),
        lease_(lease),
        stop_grace_(stop_grace),
        contender_id_(std::move(contender_id)),
        strand_(boost::asio::make_strand(io)),
        jobs_(std::move(jobs)),
        clock_(std::move(clock)),
        follow_backend_clock_(follow_backend_clock),
        records_(records),
        schedules_(std::move(schedules)),
        plan_(options_.when, options_.misfire),
        fire_timer_(strand_),
        run_timer_(strand_),
        controls_timer_(strand_) {
    status_.name = options_.name;
  }

  void attach(std::shared_ptr<contend_service> service) { service_ = std::move(service); }
  const std::shared_ptr<contend_service>& service() const { return service_; }
  const std::string& name() const override { return options_.name; }
  const std::vector<std::string>& required_tags() const override { return options_.required_tags; }
  const std::vector<std::string>& preferred_tags() const override {
    return options_.preferred_tags;
  }
  bool is_owner() const override { return service_ && service_->is_owner(); }

  // --- balance ------------------------------------------------------------------------------

  void set_wanted(bool wanted) override {
    boost::asio::post(strand_, [self = shared_from_this(), wanted] {
      self->wanted_ = wanted;
      self->apply_wanted();
    });
  }

  void try_handoff(std::function<void(bool)> done) override {
    boost::asio::post(strand_, [self = shared_from_this(), done = std::move(done)]() mutable {
      if (!self->quiet()) return done(false);
      self->handing_off_ = true;
      self->cancel_fire_timer();
      self->service_->stop([self, done = std::move(done)]() mutable {
        boost::asio::post(self->strand_, [self, done = std::move(done)] {
          self->handing_off_ = false;
          done(true);
          self->apply_wanted();
        });
      });
    });
  }
  /// The logger with this schedule, its current fence and `event` as the line's fields. On the
  /// strand only (fence_ is the strand's); elsewhere use logf(event, fence).
  detail::field_logger logf(std::string_view event) const { return logf(event, fence_); }
  /// The logger with this schedule, `fence` (0: none) and `event`; from any thread.
  detail::field_logger logf(std::string_view event, std::uint64_t fence) const {
    return detail::log({.schedule = name(), .event = event, .fence = fence});
  }

  // mutex_contender: called on the service's strand; the work happens on ours.
  void on_acquired(const mutex_state& state) override {
    boost::asio::post(
        strand_, [self = shared_from_this(), fence = state.after.fence] { self->acquired(fence); });
  }
  void on_released(const mutex_state&) override {
    boost::asio::post(strand_, [self = shared_from_this()] { self->released(); });
  }

  /// Stops firing and asks the running job to stop; `done` runs on the strand afterwards.
  void shutdown(std::function<void()> done) {
    boost::asio::post(strand_, [self = shared_from_this(), done = std::move(done)] {
      self->shutting_down_ = true;
      self->cancel_fire_timer();
      self->stop_controls();
      self->drop_retry("the scheduler is stopping");
      self->request_stop(stop_cause::shutdown, "the scheduler is stopping");
      self->set_next_fire(std::nullopt);
      done();
    });
  }

  /// Calls `done` (on the strand) once every history record made so far was written or given
  /// up (a write failed: it stays queued, but nobody waits for it), and a fire being recorded
  /// has started or, when stopping, was given back (give_back).
  void flush_history(std::function<void()> done) {
    boost::asio::post(strand_, [self = shared_from_this(), done = std::move(done)] {
      if (self->history_.empty() && !self->appending_ && !self->starting_ && !self->giving_back_)
        return done();
      self->flush_waiters_.push_back(std::move(done));
      self->pump_history();
    });
  }

  bool running() const {
    std::lock_guard lock(status_mutex_);
    return status_.running;
  }

  schedule_status status() const {
    schedule_status s;
    {
      std::lock_guard lock(status_mutex_);
      s = status_;
    }
    s.leader = service_ && service_->is_owner();
    s.fence = service_ ? service_->fence() : 0;
    if (service_) {
      s.clock_offset = service_->clock_offset();
      s.clock_refused = service_->clock_refused();
    }
    if (!s.leader) s.next_fire.reset();
    s.run_duration = run_duration_.snapshot();
    return s;
  }

 private:
  struct run {
    std::uint64_t id = 0;
    std::uint64_t term = 0;
    sys_time fire{};
    std::uint64_t fence = 0;
    run_trigger trigger = run_trigger::schedule;
    unsigned attempt = 1;
    sys_time started{};
    std::stop_source stop;
    stop_cause cause = stop_cause::none;
    steady_time deadline = steady_time::max();
    /// The lease-guarded state before this fire was recorded (a cadence run): written back if
    /// the job never started because the scheduler stopped first.
    std::optional<schedule_state> prior;
  };

  /// What a job thread hands back to the strand.
  struct run_result {
    bool threw = false;
    bool not_started = false;  ///< asked to stop before the job began
    std::string error;
    run_report report;
    sys_time end{};
    milliseconds took{0};
  };

  struct pending_retry {
    sys_time fire{};       // the planned time of the fire being retried
    unsigned attempt = 2;  // the attempt it will be
    sys_time at{};         // when it may start
  };

  template <class F>
  void update_status(F&& f) {
    std::lock_guard lock(status_mutex_);
    f(status_);
  }

  void set_next_fire(std::optional<sys_time> t) {
    update_status([&](schedule_status& s) { s.next_fire = t; });
  }

  // --- leadership ---------------------------------------------------------------------------

  void acquired(std::uint64_t fence) {
    ++term_;
    leader_ = true;
    ready_ = false;
    fence_ = fence;
    cancel_fire_timer();
    if (shutting_down_) return;
    read_state(term_);
  }

  void released() {
    if (!leader_) return;
    // The line carries the fence that was lost (or given up: stopping or removing the schedule).
    if (handing_off_)
      logf("lease.handed_off").info("'{}' released the lease for another node", contender_id_);
    else if (shutting_down_)
      logf("lease.released").info("'{}' released the lease", contender_id_);
    else
      logf("lease.lost").info("'{}' is no longer leader", contender_id_);
    ++term_;
    leader_ = false;
    ready_ = false;
    fence_ = 0;
    cancel_fire_timer();
    stop_controls();
    manual_pending_.reset();
    drop_retry("leadership was lost");
    set_next_fire(std::nullopt);
    request_stop(stop_cause::lost_lease, "leadership was lost");
  }

  void read_state(std::uint64_t term) {
    service_->async_read_state(
        [self = shared_from_this(), term](std::error_code ec, std::string bytes) {
          boost::asio::post(self->strand_, [self, term, ec, bytes = std::move(bytes)] {
            self->state_read(term, ec, bytes);
          });
        });
  }

  void state_read(std::uint64_t term, std::error_code ec, const std::string& bytes) {
    if (term != term_ || !leader_ || shutting_down_) return;
    if (ec) {
      update_status([](schedule_status& s) { ++s.state_errors; });
      logf("state.read_failed").warn("reading the last fire failed: {}; retrying", ec.message());
      arm_after(lease_.retry_period, [self = shared_from_this(), term] { self->read_state(term); });
      return;
    }
    auto parsed = parse_state(bytes);
    if (!parsed) {
      update_status([](schedule_status& s) { ++s.state_errors; });
      logf("state.unreadable").warn("unreadable recorded state '{}'; starting afresh", bytes);
    }
    state_ = parsed.value_or(schedule_state{});
    const auto& recorded = state_.fire;
    const auto now = now_system();
    plan_.start(recorded, now);
    if (recorded && recorded->last_fire > now)
      logf("state.future")
          .warn("the recorded last fire {} is in the future of this host's clock",
                fmt_time(recorded->last_fire));
    update_status([&](schedule_status& s) { s.last_fire = plan_.last_fire(); });
    logf("lease.acquired")
        .info("'{}' is leader with fence {}; last fire {}", contender_id_, fence_,
              recorded ? fmt_time(recorded->last_fire) : std::string("none recorded"));
    watch_controls(term);
    read_controls(term);  // fires once the controls are known (or unreadable)
  }

  // --- controls -----------------------------------------------------------------------------

  void watch_controls(std::uint64_t term) {
    if (watch_handle_ != 0) records_.unwatch_controls(watch_handle_);
    std::weak_ptr<schedule_runner> weak = shared_from_this();
    watch_handle_ = records_.watch_controls(name(), [weak, term] {
      if (auto self = weak.lock())
        boost::asio::post(self->strand_, [self, term] {
          if (term == self->term_ && self->leader_) self->read_controls(term);
        });
    });
  }

  // Without a push: the lease poll_interval, or longer with many schedules (see
  // controls_reads_per_second).
  milliseconds controls_poll_interval() const {
    const auto spread = milliseconds(
        static_cast<milliseconds::rep>(1000 * schedules_->load() / controls_reads_per_second));
    return std::max(lease_.poll_interval, spread);
  }

  void stop_controls() {
    ++controls_gen_;
    controls_timer_.cancel();
    if (watch_handle_ != 0) records_.unwatch_controls(watch_handle_);
    watch_handle_ = 0;
  }

  void read_controls(std::uint64_t term) {
    records_.async_read_controls(
        name(), [self = shared_from_this(), term](std::error_code ec, controls_record rec) {
          boost::asio::post(self->strand_, [self, term, ec, rec = std::move(rec)] {
            self->controls_read(term, ec, rec);
          });
        });
  }

  void controls_read(std::uint64_t term, std::error_code ec, const controls_record& rec) {
    if (term != term_ || !leader_ || shutting_down_) return;
    std::optional<schedule_controls> read;
    if (ec) {
      update_status([](schedule_status& s) { ++s.controls_errors; });
      if (!controls_error_logged_)
        logf("controls.read_failed")
            .warn(
                "reading its controls failed: {}; not paused until "
                "they can be read",
                ec.message());
      controls_error_logged_ = true;
    } else if (rec.version >= controls_version_) {
      controls_error_logged_ = false;
      try {
        read = parse_schedule_controls(rec);
      } catch (const std::invalid_argument& e) {
        update_status([](schedule_status& s) { ++s.controls_errors; });
        logf("controls.unreadable")
            .error(
                "unreadable controls (version {}): {}; treated as not "
                "paused",
                rec.version, e.what());
        read = controls_;
        read->paused = false;
        read->version = rec.version;
      }
    }
    // The next look: on a push (and at a slow safety interval), else at the lease poll_interval.
    const auto gen = ++controls_gen_;
    controls_timer_.expires_after(watch_handle_ != 0 ? controls_safety_interval
                                                     : controls_poll_interval());
    controls_timer_.async_wait([self = shared_from_this(), gen, term](boost::system::error_code) {
      if (gen != self->controls_gen_ || term != self->term_ || !self->leader_) return;
      self->read_controls(term);
    });
    if (read) apply_controls(*read);
    if (!ready_) {
      ready_ = true;
      evaluate();
    }
  }

  void apply_controls(const schedule_controls& c) {
    const bool was_paused = controls_.paused;
    const bool requests = c.trigger_requests != controls_.trigger_requests;
    controls_ = c;
    controls_version_ = c.version;
    update_status([&](schedule_status& s) {
      s.paused = c.paused;
      s.paused_reason = c.paused ? c.reason : std::string();
    });
    if (!ready_) {
      if (c.paused)
        logf("schedule.paused")
            .info("paused{}{}; not firing", c.reason.empty() ? "" : ": ", c.reason);
      return;
    }
    if (c.paused && !was_paused) {
      logf("schedule.paused")
          .info("paused{}{}; not firing until resumed", c.reason.empty() ? "" : ": ", c.reason);
      drop_retry("the schedule was paused");
      evaluate();
    } else if (!c.paused && was_paused) {
      logf("schedule.resumed").info("resumed");
      // Restart the cadence from the last fire recorded: slots skipped while paused are missed
      // fires now, and the misfire policy decides (run_once: one catch-up run; skip: dropped).
      plan_.resume(state_.fire, now_system());
      evaluate();
    } else if (requests) {
      evaluate();
    }
  }

  // --- firing -------------------------------------------------------------------------------

  // This host's wall clock, corrected to the backend's when following it: planned fire times,
  // run records and the cadence all use it.
  sys_time now_system() const {
    auto now = clock_->now_system();
    if (follow_backend_clock_ && service_)
      if (auto offset = service_->clock_offset()) now += offset->offset;
    return now;
  }

  // Balance: contend or not, as the balancer wants (a waiter leaves the queue; an owner keeps
  // its lease until handed off).
  void apply_wanted() {
    if (shutting_down_ || handing_off_ || withdrawing_ || !service_) return;
    const auto st = service_->status();
    if (wanted_) {
      if (st == service_status::initial) service_->start();
      return;
    }
    if (st != service_status::running || leader_ || service_->is_owner()) return;
    withdrawing_ = true;
    service_->stop([self = shared_from_this()] {
      boost::asio::post(self->strand_, [self] {
        self->withdrawing_ = false;
        self->apply_wanted();
      });
    });
  }

  // Nothing would be cut short by a release now: no run, nothing about to start, no fire due
  // within the quiet margin, every history record written.
  bool quiet() const {
    if (shutting_down_ || handing_off_ || withdrawing_ || !leader_ || !ready_ || run_ ||
        starting_ || manual_pending_ || retry_ || deferred_slot_ || !history_.empty() ||
        appending_ || !service_ || !service_->is_owner())
      return false;
    std::optional<sys_time> next;
    {
      std::lock_guard lock(status_mutex_);
      next = status_.next_fire;
    }
    // With misfire skip a fire that passes during the handover would be lost: leave room for
    // a waiter that only polls.
    const auto margin =
        handoff_quiet_margin +
        (options_.misfire == misfire_policy::skip ? lease_.poll_interval : milliseconds::zero());
    return !next || *next - now_system() >= margin;
  }

  void cancel_fire_timer() {
    ++fire_gen_;
    fire_timer_.cancel();
  }

  template <class F>
  void arm_after(std::chrono::steady_clock::duration delay, F action) {
    const auto gen = ++fire_gen_;
    fire_timer_.expires_after(std::clamp<std::chrono::steady_clock::duration>(
        delay, std::chrono::steady_clock::duration::zero(), max_wait));
    fire_timer_.async_wait([self = shared_from_this(), gen,
                            action = std::move(action)](boost::system::error_code) mutable {
      if (gen != self->fire_gen_) return;  // cancelled or re-armed (cancellation is racy)
      action();
    });
  }

  void arm_at(sys_time at) {
    arm_after(at - now_system(), [self = shared_from_this()] { self->evaluate(); });
  }

  void wait_until(std::optional<sys_time> wake) {
    if (wake)
      arm_at(*wake);
    else
      cancel_fire_timer();
  }

  void evaluate() {
    if (!leader_ || shutting_down_ || handing_off_ || !ready_) return;
    const bool busy = run_.has_value() || starting_;
    // A manual run asked for and not taken yet: first, whatever the cadence says.
    if (!busy && (manual_pending_ || controls_.trigger_requests > state_.manual_runs)) {
      if (!may_start(service_->lease_deadline(), clock_->now_steady(), stop_grace_)) {
        defer_manual();
        return;
      }
      if (manual_pending_)
        start_manual();
      else
        take_manual();
      return;
    }
    const auto now = now_system();
    if (controls_.paused) {
      evaluate_paused(now);
      return;
    }
    const auto d = plan_.decide(now, busy, lease_left(), stop_grace_);
    if (d.dropped)
      logf("fire.missed")
          .info("dropping the fires missed since {} (misfire policy skip)",
                fmt_time(*d.missed_since));
    switch (d.what) {
      case decision::wait:
        set_next_fire(d.wake);
        if (retry_ && !busy) {
          if (retry_->at <= now) {
            start_retry();
            return;
          }
          wait_until(d.wake ? std::min(*d.wake, retry_->at) : retry_->at);
          return;
        }
        wait_until(d.wake);
        return;
      case decision::skip_overlap:
        update_status([](schedule_status& s) { ++s.skipped_overlap; });
        logf("fire.skipped")
            .warn("fire at {} skipped: the run fired at {} is still going", fmt_time(d.slot),
                  run_ ? fmt_time(run_->fire) : std::string("just now"));
        append_history(skipped_record(d.slot, run_outcome::skipped_overlap), fence_);
        set_next_fire(d.wake);
        wait_until(d.wake);
        return;
      case decision::defer:
        defer(d.slot);
        return;
      case decision::start:
        drop_retry("the next planned fire came");
        record(d);
        return;
    }
  }

  // Paused: due slots are recorded as skipped_paused (those that came due while this node led)
  // and passed over, but the recorded last fire stays, so that resume() catches them up.
  void evaluate_paused(sys_time now) {
    set_next_fire(std::nullopt);
    auto d = plan_.due(now);
    if (d.dropped) {
      plan_.drop_missed(now);
      d = plan_.due(now);
    }
    if (d.what == decision::start) {
      // A catch_up slot was missed before this leadership began: an earlier leader recorded it
      // (or nobody led); only slots due while this node leads are recorded here.
      if (!d.catch_up) {
        logf("fire.skipped").info("fire at {} skipped: the schedule is paused", fmt_time(d.slot));
        append_history(skipped_record(d.slot, run_outcome::skipped_paused), fence_);
      }
      plan_.skipped(d.slot);
      d = plan_.due(now);
    }
    wait_until(d.wake);
  }

  std::chrono::nanoseconds lease_left() const {
    return service_->lease_deadline() - clock_->now_steady();
  }

  // The lease has stop_grace or less left: try again a little later (a renewal may come).
  void defer(sys_time slot) {
    if (deferred_slot_ != slot) {
      deferred_slot_ = slot;
      logf("fire.deferred")
          .warn(
              "fire at {} deferred: the local lease has {} ms left, not more than "
              "stop_grace {} ms",
              fmt_time(slot),
              std::max<std::int64_t>(
                  0, std::chrono::duration_cast<milliseconds>(lease_left()).count()),
              stop_grace_.count());
    }
    arm_after(std::min(lease_.retry_period, milliseconds{250}),
              [self = shared_from_this()] { self->evaluate(); });
  }

  void defer_manual() {
    arm_after(std::min(lease_.retry_period, milliseconds{250}),
              [self = shared_from_this()] { self->evaluate(); });
  }

  // Records the fire with our fence; the job starts only once that write succeeded.
  void record(const decision& d) {
    if (d.catch_up)
      logf("fire.missed")
          .info("catching up the fires missed since {} with one run", fmt_time(*d.missed_since));
    starting_ = true;
    cancel_fire_timer();
    set_next_fire(std::nullopt);
    schedule_state next = state_;
    next.fire = recorded_fire{floor_ms(d.slot), fence_, std::nullopt};
    service_->async_write_state(
        format_state(next), [self = shared_from_this(), term = term_, d, next](std::error_code ec) {
          boost::asio::post(self->strand_,
                            [self, term, d, next, ec] { self->recorded(term, d, next, ec); });
        });
  }

  static sys_time floor_ms(sys_time t) {
    return sys_time{std::chrono::floor<milliseconds>(t.time_since_epoch())};
  }

  void recorded(std::uint64_t term, const decision& d, const schedule_state& next,
                std::error_code ec) {
    starting_ = false;
    if (term != term_ || !leader_ || shutting_down_) {
      logf("fire.not_started")
          .info("fire at {} not started: {}", fmt_time(d.slot),
                shutting_down_ ? "stopping" : "leadership was lost");
      if (shutting_down_) give_back(term, ec);
      return;
    }
    if (ec) {
      update_status([](schedule_status& s) { ++s.state_errors; });
      logf("fire.not_started")
          .warn("fire at {} not started: recording it failed: {}", fmt_time(d.slot), ec.message());
      // not_owner: the lease is gone and the release is on its way. Else try again.
      if (ec != make_error_code(errc::not_owner))
        arm_after(lease_.retry_period, [self = shared_from_this()] { self->evaluate(); });
      return;
    }
    prior_state_ = state_;
    state_ = next;
    // The write took a round trip: check the lease again.
    if (!may_start(service_->lease_deadline(), clock_->now_steady(), stop_grace_)) {
      defer(d.slot);
      return;
    }
    plan_.fired(d.slot);
    deferred_slot_.reset();
    start_run(d.slot, d.catch_up ? run_trigger::catch_up : run_trigger::schedule, 1);
    evaluate();
  }

  // A manual run: record that it is taken (manual_runs + 1, with our fence) before it starts,
  // so that a new leader does not run it again.
  void take_manual() {
    starting_ = true;
    cancel_fire_timer();
    schedule_state next = state_;
    ++next.manual_runs;
    const sys_time taken = now_system();
    service_->async_write_state(format_state(next), [self = shared_from_this(), term = term_, next,
                                                     taken](std::error_code ec) {
      boost::asio::post(self->strand_, [self, term, next, taken, ec] {
        self->manual_taken(term, next, taken, ec);
      });
    });
  }

  void manual_taken(std::uint64_t term, const schedule_state& next, sys_time taken,
                    std::error_code ec) {
    starting_ = false;
    if (term != term_ || !leader_ || shutting_down_) {
      if (shutting_down_) give_back(term, ec);
      return;
    }
    if (ec) {
      update_status([](schedule_status& s) { ++s.state_errors; });
      logf("fire.not_started")
          .warn("manual run not started: recording it failed: {}", ec.message());
      if (ec != make_error_code(errc::not_owner))
        arm_after(lease_.retry_period, [self = shared_from_this()] { self->evaluate(); });
      return;
    }
    state_ = next;
    manual_pending_ = taken;
    logf("fire.manual").info("manual run {} taken", next.manual_runs);
    evaluate();
  }

  // A fire or manual run was recorded in the lease-guarded state, but the scheduler began to
  // stop before its job could start: while still the owner, write the state back as it was, so
  // that the next leader runs it (retire() releases only once flush_history() says this is done).
  void give_back(std::uint64_t term, std::error_code recorded_ec) {
    if (recorded_ec || term != term_ || !leader_ || !service_->is_owner())
      return pump_history();  // nothing was recorded, or it can no longer be undone
    giving_back_ = true;
    service_->async_write_state(
        format_state(state_), [self = shared_from_this()](std::error_code ec) {
          boost::asio::post(self->strand_, [self, ec] {
            self->giving_back_ = false;
            if (ec)
              self->logf("state.give_back_failed")
                  .warn("a fire recorded while stopping stays recorded (it will not run): {}",
                        ec.message());
            else
              self->logf("state.given_back")
                  .info("the fire recorded while stopping was given back to the next leader");
            self->pump_history();
          });
        });
  }

  void start_manual() {
    const sys_time taken = *manual_pending_;
    manual_pending_.reset();
    start_run(floor_ms(taken), run_trigger::manual, 1);
    evaluate();
  }

  void start_retry() {
    const pending_retry r = *retry_;
    retry_.reset();
    if (!may_start(service_->lease_deadline(), clock_->now_steady(), stop_grace_)) {
      retry_ = r;
      defer_manual();
      return;
    }
    start_run(r.fire, run_trigger::retry, r.attempt);
    evaluate();
  }

  void drop_retry(const char* why) {
    if (!retry_) return;
    logf("run.retry_dropped")
        .info("retry {} of the fire at {} not run: {}", retry_->attempt - 1, fmt_time(retry_->fire),
              why);
    retry_.reset();
  }

  void start_run(sys_time slot, run_trigger trigger, unsigned attempt) {
    run r;
    r.id = ++run_ids_;
    r.term = term_;
    r.fire = slot;
    r.fence = fence_;
    r.trigger = trigger;
    r.attempt = attempt;
    r.started = now_system();
    if (trigger == run_trigger::schedule || trigger == run_trigger::catch_up)
      r.prior = prior_state_;
    if (options_.timeout > milliseconds::zero())
      r.deadline = clock_->now_steady() + options_.timeout;
    job_context ctx{options_.name, contender_id_, fence_, slot, r.deadline, r.stop.get_token()};
    run_ = std::move(r);
    update_status([&](schedule_status& s) {
      ++s.runs;
      if (trigger == run_trigger::catch_up) ++s.catch_ups;
      if (trigger == run_trigger::retry) ++s.retries;
      if (trigger == run_trigger::manual) ++s.manual_runs;
      s.running = true;
      if (trigger == run_trigger::schedule || trigger == run_trigger::catch_up) s.last_fire = slot;
    });
    logf("run.started")
        .info("run started (fire {}, fence {}, {}{})", fmt_time(slot), fence_, to_string(trigger),
              attempt > 1 ? ", attempt " + std::to_string(attempt) : std::string());
    jobs_->post([self = shared_from_this(), ctx = std::move(ctx), id = run_->id] {
      self->execute(ctx, id);
    });
    arm_run_timer();
  }

  // On a job thread.
  void execute(job_context ctx, std::uint64_t id) {
    const auto started = std::chrono::steady_clock::now();
    run_result result;
    result.report.output_tail_limit = options_.history > 0 ? options_.history_output : 0;
    if (ctx.stop.stop_requested()) {
      result.threw = true;
      result.not_started = true;
      result.error = "asked to stop before it started";
    } else if (options_.async_job) {
      // The job calls back when the run has ended; until then the pool's join() waits for it.
      auto state = std::make_shared<run_result>(std::move(result));
      ctx.report = &state->report;
      jobs_->hold();
      try {
        options_.async_job(ctx, [self = shared_from_this(), ctx, id, state,
                                 started](std::exception_ptr error) mutable {
          if (error) {
            state->threw = true;
            try {
              std::rethrow_exception(error);
            } catch (const std::exception& e) {
              state->error = e.what();
            } catch (...) {
              state->error = "unknown exception";
            }
          }
          self->executed(ctx, id, std::move(*state), started);
          // Our hold on the runner ends before the pool's: once released, the scheduler (and
          // the io_context the runner's timers use) may go.
          auto jobs = self->jobs_;
          self.reset();
          jobs->release();
        });
        return;
      } catch (const std::exception& e) {
        jobs_->release();
        result = std::move(*state);
        result.threw = true;
        result.error = e.what();
      } catch (...) {
        jobs_->release();
        result = std::move(*state);
        result.threw = true;
        result.error = "unknown exception";
      }
    } else {
      ctx.report = &result.report;
      try {
        options_.job(ctx);
      } catch (const std::exception& e) {
        result.threw = true;
        result.error = e.what();
      } catch (...) {
        result.threw = true;
        result.error = "unknown exception";
      }
    }
    executed(ctx, id, std::move(result), started);
  }

  // The run has ended (on a job thread, or where an async job called back): log it and hand
  // the result to the strand.
  void executed(job_context ctx, std::uint64_t id, run_result result,
                std::chrono::steady_clock::time_point started) {
    ctx.report = nullptr;
    const auto took = std::chrono::steady_clock::now() - started;
    result.took = std::chrono::duration_cast<milliseconds>(took);
    result.end = now_system();
    // Not on the strand: the run's own fence (fence_ belongs to the strand and may have moved on).
    if (result.threw)
      logf("run.failed", ctx.fence)
          .error("run (fire {}) failed after {:.3f} s: {}", fmt_time(ctx.fire_time), seconds(took),
                 result.error);
    else
      logf("run.finished", ctx.fence)
          .info("run (fire {}) finished in {:.3f} s{}", fmt_time(ctx.fire_time), seconds(took),
                ctx.stop.stop_requested() ? " (it was asked to stop)" : "");
    boost::asio::post(strand_, [self = shared_from_this(), id, result = std::move(result)] {
      self->run_done(id, result);
    });
  }

  void run_done(std::uint64_t id, const run_result& result) {
    if (!run_ || run_->id != id) return;
    const run finished = std::move(*run_);
    run_.reset();
    ++run_gen_;
    run_timer_.cancel();
    // A job that noticed its timeout before our timer did.
    stop_cause cause = finished.cause;
    if (cause == stop_cause::none && finished.deadline != steady_time::max() &&
        clock_->now_steady() >= finished.deadline)
      cause = stop_cause::timeout;
    const run_outcome outcome = classify_outcome(cause, result.threw, result.report);
    run_duration_.observe(result.took);
    update_status([&](schedule_status& s) {
      s.running = false;
      if (result.threw) ++s.failures;
      if (outcome == run_outcome::succeeded) s.last_success = result.end;
    });
    append_history(attempt_record(finished, result, outcome, cause), finished.fence);
    // Stopping before the job began: the fire was recorded but never ran; give it back to the
    // next leader (as for a fire whose record was still in flight).
    if (shutting_down_ && result.not_started && finished.prior && finished.term == term_ &&
        leader_) {
      state_ = *finished.prior;
      return give_back(term_, {});
    }
    if (finished.term != term_ || !leader_ || shutting_down_) return;
    const bool cadence_run =
        finished.trigger == run_trigger::schedule || finished.trigger == run_trigger::catch_up;
    if (cadence_run) {
      plan_.run_ended(result.end);
      // Record the end too: a fixed_delay successor counts its period from it.
      schedule_state next = state_;
      next.fire = recorded_fire{floor_ms(finished.fire), finished.fence, floor_ms(result.end)};
      state_ = next;
      service_->async_write_state(
          format_state(next), [self = shared_from_this()](std::error_code ec) {
            if (ec && ec != make_error_code(errc::not_owner))
              self->logf("history.write_failed")
                  .debug("recording the end of a run failed: {}", ec.message());
          });
    }
    plan_retry(finished, outcome);
    evaluate();
  }

  void plan_retry(const run& finished, run_outcome outcome) {
    if (!retryable(outcome) || finished.attempt > options_.retries) return;
    const unsigned n = finished.attempt;  // retry n is attempt n + 1
    const sys_time at = now_system() + retry_delay(options_.retry_backoff, n);
    if (controls_.paused) {
      logf("run.retry_dropped")
          .info("not retrying the fire at {}: the schedule is paused", fmt_time(finished.fire));
      return;
    }
    if (!retry_fits(at, plan_.next_fire())) {
      logf("run.retry_dropped")
          .info(
              "not retrying the fire at {}: retry {} would start at {}, not before the "
              "next planned fire {}",
              fmt_time(finished.fire), n, fmt_time(at), fmt_time(*plan_.next_fire()));
      return;
    }
    logf("run.retry_scheduled")
        .info("retry {} of {} of the fire at {} at {}", n, options_.retries,
              fmt_time(finished.fire), fmt_time(at));
    retry_ = pending_retry{finished.fire, n + 1, at};
  }

  // --- history ------------------------------------------------------------------------------

  run_record base_record(sys_time planned) const {
    run_record r;
    r.schedule = name();
    r.node = contender_id_;
    r.fence = fence_;
    r.planned = floor_ms(planned);
    return r;
  }

  run_record skipped_record(sys_time slot, run_outcome why) const {
    auto r = base_record(slot);
    r.outcome = why;
    return r;
  }

  run_record attempt_record(const run& finished, const run_result& result, run_outcome outcome,
                            stop_cause cause) const {
    auto r = base_record(finished.fire);
    r.fence = finished.fence;
    r.trigger = finished.trigger;
    r.attempt = finished.attempt;
    r.started = floor_ms(finished.started);
    r.ended = floor_ms(result.end);
    r.duration = result.took;
    r.outcome = outcome;
    r.exit_status = result.report.exit_status;
    r.signal = result.report.signal;
    switch (cause) {
      case stop_cause::timeout:
        r.error = "timed out after " + format_duration(options_.timeout);
        break;
      case stop_cause::lost_lease:
        r.error = "stopped: leadership was lost";
        break;
      case stop_cause::shutdown:
        r.error = "stopped: the scheduler is stopping";
        break;
      case stop_cause::none:
        r.error = result.threw ? result.error : std::string();
        break;
    }
    if (r.error.size() > max_error_bytes) r.error.resize(max_error_bytes);
    r.output = result.report.output_tail;
    r.output_truncated = result.report.output_truncated;
    if (r.output.size() > options_.history_output) {
      r.output.erase(0, r.output.size() - options_.history_output);
      r.output_truncated = true;
    }
    return r;
  }

  // Queues `r` for the backend (written with `fence`, the ownership that made it) and writes
  // what is queued. Never blocks; a failed write stays queued and goes again with the next one.
  void append_history(run_record r, std::uint64_t fence) {
    update_status([&](schedule_status& s) {
      ++s.outcomes[static_cast<std::size_t>(r.outcome)];
      if (r.outcome == run_outcome::succeeded)
        s.consecutive_failures = 0;
      else if (retryable(r.outcome))
        ++s.consecutive_failures;
      s.last_run = r;
    });
    if (options_.history == 0) return;
    std::string bytes = to_json(r);
    while (bytes.size() > max_history_entry_bytes && !r.output.empty()) {
      r.output.erase(0, std::max<std::size_t>(r.output.size() / 2, 1));
      r.output_truncated = true;
      bytes = to_json(r);
    }
    if (const auto dropped = history_.push({fence, std::move(bytes)}); dropped > 0) {
      update_status([&](schedule_status& s) { s.history_dropped += dropped; });
      logf("history.dropped")
          .warn("{} unwritten history record(s) dropped: the queue holds at most {}", dropped,
                history_queue_bound);
    }
    pump_history();
  }

  void pump_history() {
    if (appending_) return;
    if (history_.empty()) {
      notify_flushed();
      return;
    }
    appending_ = true;
    const auto& item = history_.front();
    records_.async_append_history(
        name(), contender_id_, item.fence, item.bytes, std::min(options_.history, max_history_keep),
        [self = shared_from_this()](std::error_code ec) {
          boost::asio::post(self->strand_, [self, ec] { self->history_appended(ec); });
        });
  }

  void history_appended(std::error_code ec) {
    appending_ = false;
    if (!ec) {
      history_.pop();
      pump_history();
      return;
    }
    if (ec == make_error_code(errc::not_owner)) {
      // Another ownership began since the record's fence: a stale leader's record, rejected by
      // design.
      logf("history.rejected")
          .warn(
              "history record of fence {} rejected: another node owns the schedule "
              "since",
              history_.front().fence);
      history_.pop();
      update_status([](schedule_status& s) { ++s.history_dropped; });
      pump_history();
      return;
    }
    update_status([](schedule_status& s) { ++s.history_errors; });
    logf("history.write_failed")
        .warn(
            "writing a history record failed: {}; {} record(s) kept for the next "
            "write",
            ec.message(), history_.size());
    notify_flushed();
  }

  void notify_flushed() {
    if (starting_ || giving_back_) return;  // a record in flight, or its undoing, comes first
    auto waiters = std::move(flush_waiters_);
    flush_waiters_.clear();
    for (auto& w : waiters) w();
  }

  // --- the running job's stop point -----------------------------------------------------------

  void request_stop(stop_cause cause, const char* why) {
    if (!run_ || run_->stop.stop_requested()) return;
    logf("run.stop_requested")
        .info("asking the run fired at {} to stop: {}", fmt_time(run_->fire), why);
    run_->cause = cause;
    run_->stop.request_stop();
  }

  // Wakes at the timeout or at stop_grace before the local lease ends, whichever comes first.
  void arm_run_timer() {
    if (!run_ || run_->stop.stop_requested()) return;
    steady_time wake = run_->deadline;
    if (run_->term == term_ && leader_)
      wake = std::min(wake, stop_point(service_->lease_deadline(), stop_grace_));
    if (wake == steady_time::max()) return;
    const auto gen = ++run_gen_;
    run_timer_.expires_after(std::max<std::chrono::steady_clock::duration>(
        wake - clock_->now_steady(), std::chrono::steady_clock::duration::zero()));
    run_timer_.async_wait([self = shared_from_this(), gen](boost::system::error_code) {
      if (gen != self->run_gen_) return;
      self->check_run();
    });
  }

  void check_run() {
    if (!run_ || run_->stop.stop_requested()) return;
    const auto now = clock_->now_steady();
    if (now >= run_->deadline) {
      logf("run.timeout")
          .warn("the run fired at {} timed out after {} ms", fmt_time(run_->fire),
                options_.timeout.count());
      request_stop(stop_cause::timeout, "timeout");
      return;
    }
    if (run_->term == term_ && leader_ &&
        !may_start(service_->lease_deadline(), now, stop_grace_)) {
      request_stop(stop_cause::lost_lease,
                   "the lease was not renewed in time (stop_grace before its end)");
      return;
    }
    arm_run_timer();
  }

  schedule_options options_;
  contend_options lease_;
  milliseconds stop_grace_;
  std::string contender_id_;
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  std::shared_ptr<detail::job_pool> jobs_;
  std::shared_ptr<const scheduler_clock> clock_;
  bool follow_backend_clock_ = true;
  record_store& records_;
  std::shared_ptr<const std::atomic<std::size_t>> schedules_;  // of the scheduler, for pacing
  std::shared_ptr<contend_service> service_;

  // Strand only.
  schedule_plan plan_;
  boost::asio::steady_timer fire_timer_;
  boost::asio::steady_timer run_timer_;
  boost::asio::steady_timer controls_timer_;
  std::uint64_t term_ = 0;          // bumps on every acquisition and release
  std::uint64_t fire_gen_ = 0;      // bumps on every (re)arm or cancel of fire_timer_
  std::uint64_t run_gen_ = 0;       // same for run_timer_
  std::uint64_t controls_gen_ = 0;  // same for controls_timer_
  std::uint64_t run_ids_ = 0;
  std::uint64_t fence_ = 0;
  bool leader_ = false;
  bool ready_ = false;     // leader, and the state and controls were read (or found unreadable)
  bool starting_ = false;  // a fire or manual run is being recorded; the job starts once it is
  bool giving_back_ = false;
  schedule_state prior_state_;  // the state before the latest fire record (see run::prior)  //
                                // stopping: writing the state back as it was before that record
  bool shutting_down_ = false;
  bool wanted_ = false;       // balance: the balancer wants this node to contend
  bool handing_off_ = false;  // balance: releasing the lease for another node
  bool withdrawing_ = false;  // balance: leaving the wait queue
  std::optional<run> run_;
  std::optional<sys_time> deferred_slot_;
  schedule_state state_;                // what the lease-guarded state holds (as we wrote it)
  schedule_controls controls_;          // as last read
  std::uint64_t controls_version_ = 0;  // never apply an older read over a newer one
  bool controls_error_logged_ = false;
  std::uint64_t watch_handle_ = 0;          // 0: no push, poll
  std::optional<sys_time> manual_pending_;  // a manual run taken (recorded), not started yet
  std::optional<pending_retry> retry_;
  history_queue history_{history_queue_bound};
  bool appending_ = false;
  std::vector<std::function<void()>> flush_waiters_;

  mutable std::mutex status_mutex_;
  schedule_status status_;
  histogram run_duration_{histogram::run_bounds()};  // thread-safe; snapshot in status()
};

}  // namespace detail

using std::chrono::milliseconds;

schedule_check check_lease(const contend_options& lease, std::optional<milliseconds> stop_grace) {
  const auto show = [](milliseconds d) { return format_duration(d); };
  schedule_check out;
  out.lease = lease;
  out.problems = baton::check(lease);
  if (!out.problems.empty()) return out;
  const auto drift = lease.effective_drift_margin();
  const auto limit = detail::stop_grace_limit(lease);
  if (limit <= milliseconds::zero()) {
    out.problems.push_back(
        {"transition",
         "transition (" + show(lease.transition) + ") must be greater than the drift margin (" +
             show(drift) +
             "), so that jobs can be stopped before the lease ends: raise transition (e.g. to "
             "half of ttl)"});
    return out;
  }
  out.stop_grace = stop_grace.value_or(detail::default_stop_grace(lease));
  if (out.stop_grace < milliseconds::zero())
    out.problems.push_back({"stop_grace", "stop_grace must not be negative"});
  else if (out.stop_grace >= limit)
    out.problems.push_back(
        {"stop_grace",
         "stop_grace (" + show(out.stop_grace) + ") must be less than transition - drift margin (" +
             show(lease.transition) + " - " + show(drift) + " = " + show(limit) +
             "), else jobs would be stopped before every renewal: lower stop_grace or raise "
             "transition"});
  return out;
}

schedule_check check(const schedule_options& s, const contend_options& fallback_lease) {
  std::vector<setting_problem> problems;
  if (auto why = mutex_name_error(s.name); !why.empty())
    problems.push_back({"name", "invalid name: " + why});
  if (!s.job && !s.async_job) problems.push_back({"job", "no job"});
  if (const auto* every = std::get_if<every_trigger>(&s.when)) {
    if (every->period <= milliseconds::zero())
      problems.push_back({"every", "every: the period must be positive"});
    if (every->initial_delay < milliseconds::zero())
      problems.push_back({"initial_delay", "initial_delay must not be negative"});
  }
  if (s.timeout < milliseconds::zero())
    problems.push_back({"timeout", "timeout must not be negative"});
  if (s.history > max_history_keep)
    problems.push_back({"history", "history (" + std::to_string(s.history) + ") must be at most " +
                                       std::to_string(max_history_keep) +
                                       " records (0: no history)"});
  if (s.history_output > max_history_output)
    problems.push_back({"history_output", "history_output (" + std::to_string(s.history_output) +
                                              " bytes) must be at most " +
                                              std::to_string(max_history_output) +
                                              " bytes (8KiB; 0: no output kept)"});
  if (s.retry_backoff <= milliseconds::zero())
    problems.push_back({"retry_backoff", "retry_backoff must be positive"});
  if (is_balance_record_name(s.name))
    problems.push_back({"name", "the name '" + s.name +
                                    "' is reserved for the cluster's membership records "
                                    "(baton.nodes, baton.node.*)"});
  for (const auto* tags : {&s.required_tags, &s.preferred_tags}) {
    balance_options probe;
    probe.tags = *tags;
    for (const auto& p : baton::check(probe))
      if (p.field == "tags")
        problems.push_back(
            {tags == &s.required_tags ? "required_tags" : "preferred_tags", p.message});
  }
  auto out = check_lease(s.lease ? *s.lease : fallback_lease, s.stop_grace);
  problems.insert(problems.end(), out.problems.begin(), out.problems.end());
  out.problems = std::move(problems);
  return out;
}

struct scheduler::pool {
  std::shared_ptr<detail::job_pool> jobs;
  /// How many schedules the scheduler has (the runners pace their controls reads by it).
  std::shared_ptr<std::atomic<std::size_t>> schedules =
      std::make_shared<std::atomic<std::size_t>>(0);
};

scheduler::scheduler(mutex_backend& backend, runtime& rt, scheduler_options opts)
    : backend_(backend),
      runtime_(rt),
      options_(std::move(opts)),
      id_(options_.contender_id.empty() ? make_contender_id() : options_.contender_id),
      pool_(std::make_unique<pool>()) {
  if (options_.clock) options_.follow_backend_clock = false;  // offsets are against real time
  if (!options_.clock) options_.clock = system_scheduler_clock();
  if (options_.lease) validate(*options_.lease);
  if (options_.balance.enabled || !options_.balance.tags.empty()) {
    std::string what;
    for (const auto& p : baton::check(options_.balance))
      what += (what.empty() ? "" : "; ") + p.message;
    if (!what.empty()) throw std::invalid_argument("scheduler: balance: " + what);
  }
  pool_->jobs = std::make_shared<detail::job_pool>(std::max(1u, options_.job_threads));
  detail::set_log_node(id_);  // every log record's "node" (the last scheduler made wins)
}

scheduler::~scheduler() {
  stop(std::chrono::milliseconds{0});
  pool_->jobs->join();
}

void scheduler::add(schedule_options s) {
  if (stopped_) throw std::logic_error("scheduler: add() after stop()");
  const std::string where = "schedule '" + s.name + "'";
  if (auto why = mutex_name_error(s.name); !why.empty())
    throw std::invalid_argument(where + ": invalid name: " + why);
  {
    std::lock_guard lock(runners_mutex_);
    for (const auto& r : runners_)
      if (r->name() == s.name) throw std::invalid_argument(where + ": duplicate name");
  }
  const contend_options fallback = options_.lease ? *options_.lease : backend_.default_options();
  auto checked = baton::check(s, fallback);
  if (!checked.problems.empty()) {
    std::string what;
    for (const auto& p : checked.problems) {
      const bool lease_field = p.field != "name" && p.field != "job" && p.field != "every" &&
                               p.field != "initial_delay" && p.field != "timeout" &&
                               p.field != "stop_grace" && p.field != "history" &&
                               p.field != "history_output" && p.field != "retry_backoff" &&
                               p.field != "required_tags" && p.field != "preferred_tags";
      what += (what.empty() ? "" : "; ") + std::string(lease_field ? "lease: " : "") + p.message;
    }
    throw std::invalid_argument(where + ": " + what);
  }
  const contend_options lease = checked.lease;
  const auto grace = checked.stop_grace;
  auto name = s.name;
  auto runner = std::make_shared<detail::schedule_runner>(
      std::move(s), lease, grace, id_, runtime_.io(), pool_->jobs, options_.clock,
      options_.follow_backend_clock, backend_.records(), pool_->schedules);
  try {
    runner->attach(backend_.make_contend_service(name, runner, lease, id_));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + ": " + e.what());
  }
  // With balance the balancer starts it (at its next heartbeat) when this node should contend.
  if (started_ && !balancer_ && has_tags(options_.balance.tags, runner->required_tags()))
    runner->service()->start();
  std::lock_guard lock(runners_mutex_);
  runners_.push_back(std::move(runner));
  *pool_->schedules = runners_.size();
}

bool scheduler::remove(const std::string& name, std::chrono::milliseconds grace) noexcept {
  std::shared_ptr<detail::schedule_runner> runner;
  {
    std::lock_guard lock(runners_mutex_);
    auto it = std::find_if(runners_.begin(), runners_.end(),
                           [&](const auto& r) { return r->name() == name; });
    if (it == runners_.end()) return false;
    runner = *it;
    runners_.erase(it);
    *pool_->schedules = runners_.size();
  }
  try {
    if (started_ && !stopped_) retire({runner}, grace);
  } catch (const std::exception& e) {
    detail::log().error("scheduler: removing schedule '{}' failed: {}", name, e.what());
  }
  return true;
}

void scheduler::reserve_job_threads(unsigned n) { pool_->jobs->reserve(n); }

void scheduler::start() {
  if (started_) throw std::logic_error("scheduler: start() called twice");
  started_ = true;
  if (options_.balance.enabled) {
    const contend_options lease = options_.lease ? *options_.lease : backend_.default_options();
    const auto b = resolve(options_.balance, lease, id_);
    options_.balance = b;
    balancer_ = std::make_shared<detail::balancer>(
        runtime_.io(), backend_.records(), b, id_,
        [this]() -> std::vector<std::shared_ptr<detail::balanced_schedule>> {
          std::lock_guard lock(runners_mutex_);
          return {runners_.begin(), runners_.end()};
        });
    balancer_->start();
    return;
  }
  std::lock_guard lock(runners_mutex_);
  for (const auto& r : runners_)
    if (has_tags(options_.balance.tags, r->required_tags())) r->service()->start();
}

void scheduler::drain(bool on) {
  if (!balancer_) throw std::logic_error("scheduler: drain() needs balance enabled and start()");
  balancer_->drain(on);
}

balance_status scheduler::balance() const {
  if (!balancer_) {
    balance_status s;
    s.node_id = options_.balance.node_id;
    s.tags = options_.balance.tags;
    return s;
  }
  return balancer_->status();
}

void scheduler::stop(std::chrono::milliseconds grace) noexcept {
  try {
    if (stopped_) return;
    stopped_ = true;
    if (!started_) return;
    std::vector<std::shared_ptr<detail::schedule_runner>> all;
    {
      std::lock_guard lock(runners_mutex_);
      all = runners_;
    }
    std::function<void()> before_release;
    if (balancer_ && !runtime_.on_io_thread()) {
      // Leave the membership first, so that the others contend for this node's schedules by
      // the time it releases them.
      const auto hb = options_.balance.heartbeat;
      const auto deadline = std::chrono::steady_clock::now() +
                            std::min<milliseconds>(3 * hb + milliseconds{500}, milliseconds{5'000});
      balancer_->leave(std::min<milliseconds>(2 * hb, milliseconds{2'000}));
      before_release = [b = balancer_, deadline] { b->await_handover(deadline); };
    }
    retire(all, grace, before_release);
    if (balancer_) balancer_->stop();
  } catch (const std::exception& e) {
    detail::log().error("scheduler: stop failed: {}", e.what());
  } catch (...) {
    detail::log().error("scheduler: stop failed");
  }
}

void scheduler::retire(const std::vector<std::shared_ptr<detail::schedule_runner>>& which,
                       std::chrono::milliseconds grace,
                       const std::function<void()>& before_release) {
  const bool can_wait = !runtime_.on_io_thread();
  if (!can_wait)
    detail::log().error("scheduler: stop() called on an io thread; not waiting for jobs");

  // 1. Stop firing and ask the running jobs to stop.
  auto sync = std::make_shared<std::pair<std::mutex, std::condition_variable>>();
  auto pending = std::make_shared<std::size_t>(which.size());
  for (const auto& r : which)
    r->shutdown([sync, pending] {
      std::lock_guard lock(sync->first);
      --*pending;
      sync->second.notify_all();
    });
  if (can_wait) {
    std::unique_lock lock(sync->first);
    sync->second.wait_for(lock, std::chrono::seconds{1}, [&] { return *pending == 0; });
  }

  // 2. Wait up to `grace` for them to end.
  const auto deadline = std::chrono::steady_clock::now() + grace;
  while (can_wait) {
    bool any = std::any_of(which.begin(), which.end(), [](const auto& r) { return r->running(); });
    if (!any) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      for (const auto& r : which)
        if (r->running())
          r->logf("schedule.stop_timeout", 0)
              .error(
                  "its job is still running after the stop grace; "
                  "releasing the mutex anyway");
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }

  // 3. Write the history records of the runs that ended (bounded: a backend that is down does
  // not hold the release up).
  auto flushed = std::make_shared<std::size_t>(which.size());
  for (const auto& r : which)
    r->flush_history([sync, flushed] {
      std::lock_guard lock(sync->first);
      --*flushed;
      sync->second.notify_all();
    });
  if (can_wait) {
    std::unique_lock lock(sync->first);
    if (!sync->second.wait_for(lock, detail::history_flush_wait, [&] { return *flushed == 0; }))
      detail::log().warn("scheduler: {} schedule(s) still writing history records; releasing",
                         *flushed);
  }

  if (before_release) before_release();

  // 4. Release the mutexes, all at once, and wait for the backends to confirm.
  auto released = std::make_shared<std::size_t>(which.size());
  for (const auto& r : which)
    r->service()->stop([sync, released] {
      std::lock_guard lock(sync->first);
      --*released;
      sync->second.notify_all();
    });
  if (can_wait) {
    std::unique_lock lock(sync->first);
    if (!sync->second.wait_for(lock, detail::release_wait, [&] { return *released == 0; }))
      detail::log().warn("scheduler: {} mutex releases not confirmed in time", *released);
  }
}

void scheduler::require_schedule(const std::string& name) const {
  std::string known;
  {
    std::lock_guard lock(runners_mutex_);
    for (const auto& r : runners_) {
      if (r->name() == name) return;
      known += (known.empty() ? "" : ", ") + r->name();
    }
  }
  throw std::invalid_argument("no schedule named '" + name +
                              "' (known: " + (known.empty() ? std::string("none") : known) + ")");
}

std::vector<run_record> scheduler::history(const std::string& name, std::size_t limit) const {
  require_schedule(name);
  return read_run_history(backend_, name, limit);
}

schedule_controls scheduler::controls(const std::string& name) const {
  require_schedule(name);
  return read_schedule_controls(backend_, name);
}

schedule_controls scheduler::pause(const std::string& name, std::string reason) {
  require_schedule(name);
  return pause_schedule(backend_, name, std::move(reason), id_);
}

schedule_controls scheduler::resume(const std::string& name) {
  require_schedule(name);
  return resume_schedule(backend_, name, id_);
}

schedule_controls scheduler::trigger(const std::string& name) {
  require_schedule(name);
  return trigger_schedule(backend_, name, id_);
}

std::vector<schedule_status> scheduler::status() const {
  std::lock_guard lock(runners_mutex_);
  std::vector<schedule_status> out;
  out.reserve(runners_.size());
  for (const auto& r : runners_) out.push_back(r->status());
  return out;
}

}  // namespace baton
