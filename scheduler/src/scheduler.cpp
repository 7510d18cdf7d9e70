#include "baton/scheduler/scheduler.hpp"

#include "baton/scheduler/detail/job_pool.hpp"

#include <algorithm>
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

std::string fmt_time(sys_time t) { return format_rfc3339_utc(t); }

double seconds(std::chrono::steady_clock::duration d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

/// Drives one schedule: the contender of its mutex, its fire timer and its running job. All its
/// state lives on its own strand; status() reads a snapshot under a mutex.
class schedule_runner : public mutex_contender,
                        public std::enable_shared_from_this<schedule_runner> {
 public:
  schedule_runner(schedule_options s, contend_options lease, milliseconds stop_grace,
                  std::string contender_id, boost::asio::io_context& io,
                  std::shared_ptr<detail::job_pool> jobs,
                  std::shared_ptr<const scheduler_clock> clock)
      : options_(std::move(s)),
        lease_(lease),
        stop_grace_(stop_grace),
        contender_id_(std::move(contender_id)),
        strand_(boost::asio::make_strand(io)),
        jobs_(std::move(jobs)),
        clock_(std::move(clock)),
        plan_(options_.when, options_.misfire),
        fire_timer_(strand_),
        run_timer_(strand_) {
    status_.name = options_.name;
  }

  void attach(std::shared_ptr<contend_service> service) { service_ = std::move(service); }
  const std::shared_ptr<contend_service>& service() const { return service_; }
  const std::string& name() const { return options_.name; }

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
      self->request_stop("the scheduler is stopping");
      self->set_next_fire(std::nullopt);
      done();
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
    if (!s.leader) s.next_fire.reset();
    return s;
  }

 private:
  struct run {
    std::uint64_t id = 0;
    std::uint64_t term = 0;
    sys_time fire{};
    std::uint64_t fence = 0;
    std::stop_source stop;
    steady_time deadline = steady_time::max();
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
    fence_ = fence;
    cancel_fire_timer();
    if (shutting_down_) return;
    read_state(term_);
  }

  void released() {
    if (!leader_) return;
    ++term_;
    leader_ = false;
    fence_ = 0;
    cancel_fire_timer();
    set_next_fire(std::nullopt);
    detail::log().info("schedule '{}': '{}' is no longer leader", name(), contender_id_);
    request_stop("leadership was lost");
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
      detail::log().warn("schedule '{}': reading the last fire failed: {}; retrying", name(),
                         ec.message());
      arm_after(lease_.retry_period, [self = shared_from_this(), term] { self->read_state(term); });
      return;
    }
    auto recorded = parse_schedule_state(bytes);
    if (!recorded && !bytes.empty()) {
      update_status([](schedule_status& s) { ++s.state_errors; });
      detail::log().warn("schedule '{}': unreadable recorded state '{}'; starting afresh", name(),
                         bytes);
    }
    const auto now = clock_->now_system();
    plan_.start(recorded, now);
    if (recorded && recorded->last_fire > now)
      detail::log().warn(
          "schedule '{}': the recorded last fire {} is in the future of this host's clock", name(),
          fmt_time(recorded->last_fire));
    update_status([&](schedule_status& s) { s.last_fire = plan_.last_fire(); });
    detail::log().info("schedule '{}': '{}' is leader with fence {}; last fire {}", name(),
                       contender_id_, fence_,
                       recorded ? fmt_time(recorded->last_fire) : std::string("none recorded"));
    evaluate();
  }

  // --- firing -------------------------------------------------------------------------------

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
    arm_after(at - clock_->now_system(), [self = shared_from_this()] { self->evaluate(); });
  }

  void evaluate() {
    if (!leader_ || shutting_down_) return;
    const auto now = clock_->now_system();
    const auto d = plan_.decide(now, run_.has_value() || starting_, lease_left(), stop_grace_);
    if (d.dropped)
      detail::log().info("schedule '{}': dropping the fires missed since {} (misfire policy skip)",
                         name(), fmt_time(*d.missed_since));
    switch (d.what) {
      case decision::wait:
        set_next_fire(d.wake);
        if (d.wake)
          arm_at(*d.wake);
        else
          cancel_fire_timer();
        return;
      case decision::skip_overlap:
        update_status([](schedule_status& s) { ++s.skipped_overlap; });
        detail::log().warn("schedule '{}': fire at {} skipped: the run fired at {} is still going",
                           name(), fmt_time(d.slot),
                           run_ ? fmt_time(run_->fire) : std::string("just now"));
        set_next_fire(d.wake);
        if (d.wake)
          arm_at(*d.wake);
        else
          cancel_fire_timer();
        return;
      case decision::defer:
        defer(d.slot);
        return;
      case decision::start:
        record(d);
        return;
    }
  }

  std::chrono::nanoseconds lease_left() const {
    return service_->lease_deadline() - clock_->now_steady();
  }

  // The lease has stop_grace or less left: try again a little later (a renewal may come).
  void defer(sys_time slot) {
    if (deferred_slot_ != slot) {
      deferred_slot_ = slot;
      detail::log().warn(
          "schedule '{}': fire at {} deferred: the local lease has {} ms left, not more than "
          "stop_grace {} ms",
          name(), fmt_time(slot),
          std::max<std::int64_t>(0, std::chrono::duration_cast<milliseconds>(lease_left()).count()),
          stop_grace_.count());
    }
    arm_after(std::min(lease_.retry_period, milliseconds{250}),
              [self = shared_from_this()] { self->evaluate(); });
  }

  // Records the fire with our fence; the job starts only once that write succeeded.
  void record(const decision& d) {
    if (d.catch_up)
      detail::log().info("schedule '{}': catching up the fires missed since {} with one run",
                         name(), fmt_time(*d.missed_since));
    starting_ = true;
    cancel_fire_timer();
    set_next_fire(std::nullopt);
    const recorded_fire fire_record{floor_ms(d.slot), fence_, std::nullopt};
    service_->async_write_state(
        format_schedule_state(fire_record),
        [self = shared_from_this(), term = term_, d](std::error_code ec) {
          boost::asio::post(self->strand_, [self, term, d, ec] { self->recorded(term, d, ec); });
        });
  }

  static sys_time floor_ms(sys_time t) {
    return sys_time{std::chrono::floor<milliseconds>(t.time_since_epoch())};
  }

  void recorded(std::uint64_t term, const decision& d, std::error_code ec) {
    starting_ = false;
    if (term != term_ || !leader_ || shutting_down_) {
      detail::log().info("schedule '{}': fire at {} not started: {}", name(), fmt_time(d.slot),
                         shutting_down_ ? "stopping" : "leadership was lost");
      return;
    }
    if (ec) {
      update_status([](schedule_status& s) { ++s.state_errors; });
      detail::log().warn("schedule '{}': fire at {} not started: recording it failed: {}", name(),
                         fmt_time(d.slot), ec.message());
      // not_owner: the lease is gone and the release is on its way. Else try again.
      if (ec != make_error_code(errc::not_owner))
        arm_after(lease_.retry_period, [self = shared_from_this()] { self->evaluate(); });
      return;
    }
    // The write took a round trip: check the lease again.
    if (!may_start(service_->lease_deadline(), clock_->now_steady(), stop_grace_)) {
      defer(d.slot);
      return;
    }
    start_run(d);
    evaluate();
  }

  void start_run(const decision& step) {
    const sys_time slot = step.slot;
    plan_.fired(slot);
    deferred_slot_.reset();
    run r;
    r.id = ++run_ids_;
    r.term = term_;
    r.fire = slot;
    r.fence = fence_;
    if (options_.timeout > milliseconds::zero())
      r.deadline = clock_->now_steady() + options_.timeout;
    job_context ctx{options_.name, contender_id_, fence_, slot, r.deadline, r.stop.get_token()};
    run_ = std::move(r);
    update_status([&](schedule_status& s) {
      ++s.runs;
      if (step.catch_up) ++s.catch_ups;
      s.running = true;
      s.last_fire = slot;
    });
    detail::log().info("schedule '{}': run started (fire {}, fence {})", name(), fmt_time(slot),
                       fence_);
    jobs_->post([self = shared_from_this(), ctx = std::move(ctx), id = run_->id] {
      self->execute(ctx, id);
    });
    arm_run_timer();
  }

  // On a job thread.
  void execute(const job_context& ctx, std::uint64_t id) {
    const auto started = std::chrono::steady_clock::now();
    std::string error;
    bool failed = false;
    if (ctx.stop.stop_requested()) {
      failed = true;
      error = "asked to stop before it started";
    } else {
      try {
        options_.job(ctx);
      } catch (const std::exception& e) {
        failed = true;
        error = e.what();
      } catch (...) {
        failed = true;
        error = "unknown exception";
      }
    }
    const auto took = std::chrono::steady_clock::now() - started;
    const auto end = clock_->now_system();
    if (failed)
      detail::log().error("schedule '{}': run (fire {}) failed after {:.3f} s: {}", name(),
                          fmt_time(ctx.fire_time), seconds(took), error);
    else
      detail::log().info("schedule '{}': run (fire {}) finished in {:.3f} s{}", name(),
                         fmt_time(ctx.fire_time), seconds(took),
                         ctx.stop.stop_requested() ? " (it was asked to stop)" : "");
    boost::asio::post(
        strand_, [self = shared_from_this(), id, failed, end] { self->run_done(id, failed, end); });
  }

  void run_done(std::uint64_t id, bool failed, sys_time end) {
    if (!run_ || run_->id != id) return;
    const run finished = std::move(*run_);
    run_.reset();
    ++run_gen_;
    run_timer_.cancel();
    update_status([&](schedule_status& s) {
      s.running = false;
      if (failed) ++s.failures;
    });
    if (finished.term != term_ || !leader_ || shutting_down_) return;
    plan_.run_ended(end);
    // Record the end too: a fixed_delay successor counts its period from it.
    const recorded_fire end_record{floor_ms(finished.fire), finished.fence, floor_ms(end)};
    service_->async_write_state(
        format_schedule_state(end_record), [self = shared_from_this()](std::error_code ec) {
          if (ec && ec != make_error_code(errc::not_owner))
            detail::log().debug("schedule '{}': recording the end of a run failed: {}",
                                self->name(), ec.message());
        });
    evaluate();
  }

  // --- the running job's stop point -----------------------------------------------------------

  void request_stop(const char* why) {
    if (!run_ || run_->stop.stop_requested()) return;
    detail::log().info("schedule '{}': asking the run fired at {} to stop: {}", name(),
                       fmt_time(run_->fire), why);
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
      detail::log().warn("schedule '{}': the run fired at {} timed out after {} ms", name(),
                         fmt_time(run_->fire), options_.timeout.count());
      request_stop("timeout");
      return;
    }
    if (run_->term == term_ && leader_ &&
        !may_start(service_->lease_deadline(), now, stop_grace_)) {
      request_stop("the lease was not renewed in time (stop_grace before its end)");
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
  std::shared_ptr<contend_service> service_;

  // Strand only.
  schedule_plan plan_;
  boost::asio::steady_timer fire_timer_;
  boost::asio::steady_timer run_timer_;
  std::uint64_t term_ = 0;      // bumps on every acquisition and release
  std::uint64_t fire_gen_ = 0;  // bumps on every (re)arm or cancel of fire_timer_
  std::uint64_t run_gen_ = 0;   // same for run_timer_
  std::uint64_t run_ids_ = 0;
  std::uint64_t fence_ = 0;
  bool leader_ = false;
  bool starting_ = false;  // the fire is being recorded; the job starts once it is
  bool shutting_down_ = false;
  std::optional<run> run_;
  std::optional<sys_time> deferred_slot_;

  mutable std::mutex status_mutex_;
  schedule_status status_;
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
  if (!s.job) problems.push_back({"job", "no job"});
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
  auto out = check_lease(s.lease ? *s.lease : fallback_lease, s.stop_grace);
  problems.insert(problems.end(), out.problems.begin(), out.problems.end());
  out.problems = std::move(problems);
  return out;
}

struct scheduler::pool {
  std::shared_ptr<detail::job_pool> jobs;
};

scheduler::scheduler(mutex_backend& backend, runtime& rt, scheduler_options opts)
    : backend_(backend),
      runtime_(rt),
      options_(std::move(opts)),
      id_(options_.contender_id.empty() ? make_contender_id() : options_.contender_id),
      pool_(std::make_unique<pool>()) {
  if (!options_.clock) options_.clock = system_scheduler_clock();
  if (options_.lease) validate(*options_.lease);
  pool_->jobs = std::make_shared<detail::job_pool>(std::max(1u, options_.job_threads));
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
                               p.field != "history_output" && p.field != "retry_backoff";
      what += (what.empty() ? "" : "; ") + std::string(lease_field ? "lease: " : "") + p.message;
    }
    throw std::invalid_argument(where + ": " + what);
  }
  const contend_options lease = checked.lease;
  const auto grace = checked.stop_grace;
  auto name = s.name;
  auto runner = std::make_shared<detail::schedule_runner>(
      std::move(s), lease, grace, id_, runtime_.io(), pool_->jobs, options_.clock);
  try {
    runner->attach(backend_.make_contend_service(name, runner, lease, id_));
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + ": " + e.what());
  }
  if (started_) runner->service()->start();
  std::lock_guard lock(runners_mutex_);
  runners_.push_back(std::move(runner));
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
  std::lock_guard lock(runners_mutex_);
  for (const auto& r : runners_) r->service()->start();
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
    retire(all, grace);
  } catch (const std::exception& e) {
    detail::log().error("scheduler: stop failed: {}", e.what());
  } catch (...) {
    detail::log().error("scheduler: stop failed");
  }
}

void scheduler::retire(const std::vector<std::shared_ptr<detail::schedule_runner>>& which,
                       std::chrono::milliseconds grace) {
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
          detail::log().error(
              "scheduler: schedule '{}': its job is still running after the stop grace; "
              "releasing the mutex anyway",
              r->name());
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds{5});
  }

  // 3. Release the mutexes, all at once, and wait for the backends to confirm.
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
