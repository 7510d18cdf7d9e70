// The ZooKeeper contend service. On its strand it runs one request at a time through these
// steps, driven by replies, predecessor watches and session events:
//   create  "<dir>/_c_<guid>-lock-" EPHEMERAL|SEQUENTIAL (data: contender id)
//   find    after a lost create reply: list the children, adopt the node with our guid prefix
//   verify  after a reconnect: our node exists and its ephemeralOwner is our session
//   list    lowest node -> owner (fence = czxid); else watch only the predecessor
// The local lease comes from the session heartbeat: the send time of the latest answered request
// plus the negotiated session timeout, minus a margin. A disconnect does not end it: the owner
// keeps leading while the session may still live (Curator's session-based connection policy),
// a reconnect within the session extends it, and the session's lapse event steps every owner
// down at the deadline, before the server could have expired the session. The deadline is the
// session's, read when asked (lease_deadline()): owners are not told of each heartbeat, only
// every other one or so, to publish the renewal in their owner record.
// Clock: the create reply's ctime (server clock) measures this host's offset; so does a setData
// of the scratch node <base>/@clock (its mtime), every clock_probe_period(). While the offset is
// beyond max_clock_offset the contender holds no lock node (an owner steps down and deletes it)
// and probes every session timeout (1..10 s) until it is back within bounds.
#include "contend.hpp"

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

#include <algorithm>
#include <atomic>
#include <random>

#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/errc.hpp"

namespace baton::backends::zookeeper::detail {
namespace {

class zk_contend_service final : public contend_service {
 public:
  zk_contend_service(std::shared_ptr<session> s, std::string name, std::string id,
                     std::shared_ptr<mutex_contender> contender, contend_options options)
      : contend_service(s->rt().io(), std::move(name), std::move(id), std::move(contender), options,
                        "zookeeper"),
        session_(std::move(s)),
        dir_(session_->config().mutex_dir(mutex_name())),
        lease_timer_(get_executor()),
        retry_timer_(get_executor()),
        clock_timer_(get_executor()) {
    // An owner's local lease is the session's: read when asked, not pushed to each owner.
    set_deadline_source([this] {
      const auto gen = lease_gen_.load();
      return gen == 0 ? steady::time_point{} : session_->lease_deadline(gen);
    });
  }

  ~zk_contend_service() override {
    // Destroyed without stop(): our node must not block the queue until the session ends.
    if (!node_.empty() || uncertain_) session_->delete_abandoned(dir_, guid_);
    session_->unsubscribe(key());
    if (watch_token_ != 0) session_->watches().remove(watch_token_);
  }

  void async_read_state(state_handler handler) override {
    session_->get(0, dir_, false,
                  [strand = get_executor(), handler = std::move(handler)](op_result r) mutable {
                    boost::asio::post(strand, [handler = std::move(handler), r = std::move(r)] {
                      if (r.rc == ZOK) return handler({}, r.data);
                      if (r.rc == ZNONODE) return handler({}, std::string{});
                      handler(translate(r.rc), std::string{});
                    });
                  });
  }

  void async_write_state(std::string bytes, done_handler handler) override {
    boost::asio::post(get_executor(), [self = shared(), bytes = std::move(bytes),
                                       handler = std::move(handler)]() mutable {
      if (!self->leader() || !self->is_owner() || self->node_.empty()) {
        handler(make_error_code(errc::not_owner));
        return;
      }
      // One transaction: our owner node still exists, and the state is written.
      self->session_->check_and_set(
          self->sgen_, self->node_path(), self->dir_, std::move(bytes),
          [strand = self->get_executor(), handler = std::move(handler)](op_result r) mutable {
            boost::asio::post(strand, [handler = std::move(handler), rc = r.rc] {
              if (rc == ZOK) return handler({});
              if (rc == ZNONODE || rc == ZBADVERSION || session_gone(rc))
                return handler(make_error_code(errc::not_owner));
              handler(translate(rc));
            });
          });
    });
  }

 protected:
  void start_contend(std::uint64_t) override {
    running_ = true;
    stopping_ = false;
    guid_ = make_guid();
    node_.clear();
    uncertain_ = verified_ = need_list_ = await_heartbeat_ = false;
    failures_ = 0;
    op_ = 0;
    observed_ = mutex_owner{};
    if (!proxy_) proxy_ = std::make_shared<proxy>(weak_self());
    auto snapshot = session_->subscribe(key(), proxy_);
    heartbeats_ = false;  // subscribe() starts without them
    sgen_ = snapshot.gen;
    seq_ = snapshot.seq;
    connected_ = snapshot.connected;
    if (!connected_) notify_error(make_error_code(errc::connection_lost));
    schedule_clock_probe(clock_probe_period());
    advance();
  }

  void stop_contend(std::uint64_t, std::function<void()> done) noexcept override {
    running_ = false;
    stopping_ = true;
    stop_done_ = std::move(done);
    await_heartbeat_ = false;
    lease_timer_.cancel();
    ++clock_seq_;
    clock_timer_.cancel();
    cancel_retry();
    remove_watch();
    cleanup();
  }

 private:
  // Forwards session events onto our strand; owned by the service, held weakly by the session.
  struct proxy final : session_listener {
    explicit proxy(std::weak_ptr<zk_contend_service> t) : target(std::move(t)) {}
    void on_session_event(const session_event& event) override {
      if (auto t = target.lock())
        boost::asio::post(t->get_executor(), [weak = target, event] {
          if (auto self = weak.lock()) self->on_session(event);
        });
    }
    bool wants(session_event::kind_type kind, steady::time_point now) const noexcept override {
      return kind != session_event::heartbeat ||
             now.time_since_epoch().count() >= quiet_until.load(std::memory_order_relaxed);
    }
    std::weak_ptr<zk_contend_service> target;
    // An owner that just published a renewal skips the heartbeats until then (steady clock
    // ticks; 0: none skipped). Lapses always come.
    std::atomic<steady::rep> quiet_until{0};
  };

  // Heartbeat and lapse events while leading or waiting for a heartbeat (session::
  // want_heartbeats()). Turned off only by the heartbeat handler, so a contender that needs one
  // never misses it.
  void want_heartbeats(bool on) {
    if (heartbeats_ == on) return;
    heartbeats_ = on;
    session_->want_heartbeats(key(), on);
  }

  using step = void (zk_contend_service::*)(const op_result&);

  std::shared_ptr<zk_contend_service> shared() {
    return std::static_pointer_cast<zk_contend_service>(shared_from_this());
  }
  std::weak_ptr<zk_contend_service> weak_self() { return shared(); }
  std::uint64_t key() const noexcept { return reinterpret_cast<std::uintptr_t>(this); }
  std::string node_path() const { return dir_ + "/" + node_; }
  std::chrono::milliseconds session_timeout() const { return session_->session_timeout(); }

  // A completion that runs `next` on the strand if it is still the request we wait for. It holds
  // no strong reference: the client's threads must never own (and so destroy) a service.
  op_handler bind(step next) {
    const auto token = ++op_counter_;
    op_ = token;
    return [weak = weak_self(), strand = get_executor(), token, next](op_result r) {
      boost::asio::post(strand, [weak, token, next, r = std::move(r)] {
        auto self = weak.lock();
        if (!self || self->op_ != token) return;
        self->op_ = 0;
        (self.get()->*next)(r);
      });
    };
  }

  void advance() {
    if (stopping_) return cleanup();
    if (!running_ || op_ != 0 || retry_pending_ || !connected_) return;
    // A clock too far off the server's does not queue: the clock probe lets it join again.
    if (node_.empty() && !uncertain_) return clock_refused() ? void() : do_create();
    if (uncertain_) return do_find();
    if (!verified_) return do_verify();
    if (need_list_) return do_list();
  }

  // ---- create --------------------------------------------------------------------------------

  void do_create() { session_->ensure_path(sgen_, dir_, bind(&zk_contend_service::on_dir_ready)); }

  void on_dir_ready(const op_result& r) {
    if (r.rc != ZOK) return on_failure(r.rc, "creating the mutex folder");
    if (stopping_) return cleanup();
    create_sent_ = std::chrono::system_clock::now();
    session_->create_lock(sgen_, dir_ + "/" + lock_prefix(guid_), contender_id(),
                          bind(&zk_contend_service::on_created));
  }

  void on_created(const op_result& r) {
    if (r.rc == ZOK) {
      node_ = r.path.substr(r.path.rfind('/') + 1);
      node_gen_ = sgen_;
      node_stat_ = r.stat;
      uncertain_ = false;
      verified_ = true;
      need_list_ = true;
      failures_ = 0;
      // The node's ctime is the server's clock between our send and this reply.
      note_backend_clock(backend_time{std::chrono::milliseconds{r.stat.ctime}}, create_sent_,
                         std::chrono::system_clock::now());
      if (clock_refused() && !stopping_) return refuse();
      return stopping_ ? cleanup() : advance();
    }
    if (connection_trouble(r.rc)) {
      // The node may exist without us knowing its name: find it by our guid before retrying.
      uncertain_ = true;
      node_gen_ = sgen_;
    } else if (r.rc == ZNONODE) {
      session_->forget_dir(dir_);
    }
    on_failure(r.rc, "creating the lock node");
  }

  // ---- find (after a lost create reply) ------------------------------------------------------

  void do_find() { session_->get_children(sgen_, dir_, bind(&zk_contend_service::on_found)); }

  void on_found(const op_result& r) {
    if (r.rc != ZOK && r.rc != ZNONODE) return on_failure(r.rc, "looking for the lock node");
    uncertain_ = false;
    node_.clear();
    const auto prefix = lock_prefix(guid_);
    for (const auto& child : r.children) {
      if (child.rfind(prefix, 0) == 0 && lock_sequence(child) >= 0) {
        node_ = child;
        node_gen_ = sgen_;
        verified_ = false;
        need_list_ = true;
        ++session_->counters().nodes_adopted;
        baton::detail::log().info("mutex '{}': found lock node {} created before a lost reply",
                                  mutex_name(), child);
        break;
      }
    }
    if (r.rc == ZNONODE) session_->forget_dir(dir_);
    stopping_ ? cleanup() : advance();
  }

  // ---- verify (after a reconnect or a lapsed local lease) ------------------------------------

  void do_verify() { session_->exists(sgen_, node_path(), bind(&zk_contend_service::on_verified)); }

  void on_verified(const op_result& r) {
    if (r.rc == ZOK && r.stat.ephemeralOwner == session_->client_id(sgen_) &&
        r.stat.ephemeralOwner != 0) {
      verified_ = true;
      node_stat_ = r.stat;
      need_list_ = true;
      failures_ = 0;
      return stopping_ ? cleanup() : advance();
    }
    if (r.rc == ZOK) return node_lost("belongs to another session", true);
    if (r.rc == ZNONODE) return node_lost("is gone", false);
    on_failure(r.rc, "checking the lock node");
  }

  // ---- list: owner or watch the predecessor --------------------------------------------------

  void do_list() {
    need_list_ = false;  // a wake-up from now on asks for another round
    session_->get_children(sgen_, dir_, bind(&zk_contend_service::on_listed));
  }

  void on_listed(const op_result& r) {
    if (r.rc == ZNONODE) {
      session_->forget_dir(dir_);
      return node_lost("is gone (its folder was deleted)", false);
    }
    if (r.rc != ZOK) {
      need_list_ = true;
      return on_failure(r.rc, "listing the contenders");
    }
    if (stopping_) return cleanup();
    failures_ = 0;
    auto locks = sorted_locks(r.children);
    auto me = std::find(locks.begin(), locks.end(), node_);
    if (me == locks.end()) return node_lost("is gone", false);
    // A second node of ours (a create that was answered late) would block the queue: delete it.
    const auto prefix = lock_prefix(guid_);
    for (const auto& l : locks)
      if (l != node_ && l.rfind(prefix, 0) == 0) {
        baton::detail::log().info("mutex '{}': deleting duplicate lock node {}", mutex_name(), l);
        session_->remove(sgen_, dir_ + "/" + l, [](op_result) {});
      }
    if (me == locks.begin()) return claim();

    // Watch only the predecessor: its deletion wakes us, nobody else (no herd).
    predecessor_ = *(me - 1);
    lowest_ = locks.front();
    remove_watch();
    const auto seq = ++watch_seq_;
    watch_token_ = session_->watches().add(sgen_, dir_ + "/" + predecessor_,
                                           [weak = weak_self(), strand = get_executor(), seq] {
                                             boost::asio::post(strand, [weak, seq] {
                                               if (auto self = weak.lock())
                                                 self->on_predecessor_event(seq);
                                             });
                                           });
    session_->get(sgen_, dir_ + "/" + predecessor_, true, bind(&zk_contend_service::on_watching));
  }

  void on_watching(const op_result& r) {
    if (r.rc == ZNONODE) {  // gone already: no watch was left
      remove_watch();
      need_list_ = true;
      return stopping_ ? cleanup() : advance();
    }
    if (r.rc != ZOK) {
      remove_watch();
      need_list_ = true;
      return on_failure(r.rc, "watching the predecessor");
    }
    if (stopping_) return cleanup();
    if (predecessor_ == lowest_) {
      observe(r.data, r.stat);
      return advance();
    }
    session_->get(sgen_, dir_ + "/" + lowest_, false, bind(&zk_contend_service::on_lowest));
  }

  void on_lowest(const op_result& r) {
    if (r.rc == ZOK)
      observe(r.data, r.stat);
    else if (r.rc == ZNONODE)
      need_list_ = true;  // the owner just left; its successor's watch fires, we look again
    else if (!connection_trouble(r.rc) && !session_gone(r.rc))
      notify_error(translate(r.rc));
    stopping_ ? cleanup() : advance();
  }

  void on_predecessor_event(std::uint64_t seq) {
    if (seq != watch_seq_ || watch_token_ == 0) return;
    watch_token_ = 0;  // the table dropped it when it fired
    need_list_ = true;
    advance();
  }

  void observe(const std::string& owner_id, const struct Stat& stat) {
    observed_ = owner_record(owner_id, stat, session_timeout());
    notify_observed(observed_);
  }

  // ---- ownership -----------------------------------------------------------------------------

  void claim() {
    if (clock_refused()) return refuse();
    // Before the deadline is read: a lapse of the session from then on reaches us.
    proxy_->quiet_until = 0;
    want_heartbeats(true);  // an owner publishes renewals with them, and needs lapses
    const auto deadline = session_->lease_deadline(sgen_);
    if (deadline <= steady::now()) {
      // The session has not been proven alive lately: wait for the next heartbeat.
      await_heartbeat_ = true;
      return;
    }
    mine_ = owner_record(contender_id(), node_stat_, session_timeout());
    auto before = observed_;
    observed_ = mine_;
    lease_gen_ = sgen_;
    if (!leader()) {
      baton::detail::log().debug("mutex '{}': lock node {} is the lowest, fence {}", mutex_name(),
                                 node_, mine_.fence);
      notify_acquired(mutex_state{before, mine_, contender_id()}, deadline);
    } else {
      extend_lease(deadline);
    }
    notify_observed(mine_);
    // The session's lapse event steps us down when its lease runs out; this timer only covers
    // a lapse that came before we were listening for it.
    arm_lease_timer(deadline);
  }

  void arm_lease_timer(steady::time_point deadline) {
    const auto seq = ++lease_seq_;
    lease_timer_.expires_at(deadline);
    lease_timer_.async_wait([weak = weak_self(), seq](boost::system::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || seq != self->lease_seq_) return;
      self->on_lease_timer();
    });
  }

  // The lease timer, or a lapse event of the session.
  void on_lease_timer() {
    if (!leader()) return;
    // Proven alive meanwhile: the session's lapse timer watches on (one for all owners).
    if (steady::now() < session_->lease_deadline(sgen_)) return;
    baton::detail::log({.schedule = mutex_name(), .event = "lease.expired", .fence = mine_.fence})
        .warn(
            "no answer from ZooKeeper within the session timeout ({} ms{}): the local lease ran "
            "out, stepping down before the session could expire",
            session_timeout().count(), connected_ ? "" : ", disconnected");
    step_down(release_reason::step_down);
    verified_ = false;
    need_list_ = true;
    advance();
  }

  // `why`: lost when ZooKeeper ended the ownership (node gone, session expired), step_down when
  // it is our own decision (local lease ran out, connection dropped).
  void step_down(release_reason why) {
    if (!leader()) return;
    ++lease_seq_;
    lease_timer_.cancel();
    notify_released(mutex_state{mine_, mutex_owner{}, contender_id()}, why);
    lease_gen_ = 0;
    observed_ = mutex_owner{};
  }

  void node_lost(const char* why, bool delete_it) {
    baton::detail::log().info("mutex '{}': lock node {} {}; joining again", mutex_name(), node_,
                              why);
    step_down(release_reason::lost);
    if (delete_it) session_->delete_abandoned(dir_, guid_);
    node_.clear();
    guid_ = make_guid();
    uncertain_ = verified_ = false;
    need_list_ = true;
    stopping_ ? cleanup() : advance();
  }

  // ---- clock -------------------------------------------------------------------------------

  // The clock is too far off the server's: no lock node (an owner steps down), probe until it
  // is back within max_clock_offset.
  void refuse() {
    if (leader()) {
      step_down(release_reason::step_down);
      // Keep the lock node for one transition before handing over: the jobs asked to stop now
      // are gone by then (kill_grace <= stop_grace < transition), so the next owner never
      // overlaps them. claim() refuses meanwhile.
      handover_at_ = steady::now() + options().transition;
    }
    remove_watch();
    if (const auto now = steady::now(); !node_.empty() && now < handover_at_) {
      schedule_clock_probe(std::min(
          clock_probe_period(), std::chrono::ceil<std::chrono::milliseconds>(handover_at_ - now)));
      return;
    }
    if (!node_.empty()) {
      session_->remove(sgen_, node_path(), [](op_result) {});
      node_.clear();
    }
    if (uncertain_) session_->delete_abandoned(dir_, guid_);  // a create whose reply was lost
    uncertain_ = false;
    guid_ = make_guid();
    verified_ = need_list_ = await_heartbeat_ = false;
    schedule_clock_probe(clock_probe_period());
  }

  // Refused: every session timeout (1..10 s). Otherwise once a minute, to follow a clock that
  // jumps while this node holds its node.
  std::chrono::milliseconds clock_probe_period() const {
    using std::chrono::milliseconds;
    if (clock_refused())
      return std::clamp(session_timeout(), milliseconds{1'000}, milliseconds{10'000});
    // About once a minute, spread over [54, 66) s so that mutexes started together do not
    // all probe in the same instant (readings are shared, the wake-ups are not).
    thread_local std::minstd_rand spread{std::random_device{}()};
    return milliseconds{54'000 + static_cast<long>(spread() % 12'000)};
  }

  void schedule_clock_probe(std::chrono::milliseconds delay) {
    const auto seq = ++clock_seq_;
    clock_timer_.expires_after(delay);
    clock_timer_.async_wait([weak = weak_self(), seq](boost::system::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || seq != self->clock_seq_) return;
      self->probe_clock();
    });
  }

  // A reading of the server's clock (setData of <base>/@clock, created when missing; '@' is
  // never in a mutex name: its mtime is the server's clock when the write was applied). The
  // session shares readings among its contenders.
  void probe_clock() {
    if (!running_ || stopping_) return;
    if (!connected_) return schedule_clock_probe(clock_probe_period());
    const auto seq = clock_seq_;
    session_->read_clock(
        sgen_, [weak = weak_self(), strand = get_executor(), seq](const clock_reading& reading) {
          boost::asio::post(strand, [weak, seq, reading] {
            if (auto self = weak.lock(); self && seq == self->clock_seq_)
              self->on_clock_probe(reading);
          });
        });
  }

  void on_clock_probe(const clock_reading& r) {
    if (!running_ || stopping_) return;
    if (r.rc == ZOK) {
      note_backend_clock(backend_time{std::chrono::milliseconds{r.mtime_ms}}, r.sent, r.received);
      if (clock_refused() && (!node_.empty() || uncertain_ || leader()))
        refuse();  // reschedules
      else if (!clock_refused())
        advance();  // joins again when it had no node
    }
    schedule_clock_probe(clock_probe_period());
  }

  // ---- session events ------------------------------------------------------------------------

  void on_session(const session_event& event) {
    if (!running_ && !stopping_) {
      if (event.kind == session_event::heartbeat) want_heartbeats(false);
      return;
    }
    if (event.kind == session_event::heartbeat) {
      if (event.gen != sgen_) return;
      if (leader()) {
        const auto deadline = session_->lease_deadline(sgen_);
        if (deadline > steady::now()) {
          // The renewal of a ZooKeeper owner: its session was proven alive, the fence is kept.
          // Published every other heartbeat or so: lease_deadline() reads the session's
          // deadline when asked, so this only keeps the owner record current (its
          // transition_at stays ahead of now) and counts the renewal.
          extend_lease(deadline);
          mine_ = owner_record(contender_id(), node_stat_, session_timeout());
          observed_ = mine_;
          notify_observed(mine_);
          proxy_->quiet_until = (steady::now() + session_timeout() / 2).time_since_epoch().count();
        }
      }
      if (await_heartbeat_) {
        await_heartbeat_ = false;
        need_list_ = true;
        advance();
      }
      if (!leader() && !await_heartbeat_) want_heartbeats(false);
      return;
    }
    if (event.kind == session_event::lapsed) {
      if (event.gen == sgen_ && leader()) on_lease_timer();
      return;
    }
    if (event.seq <= seq_) return;
    seq_ = event.seq;
    switch (event.kind) {
      case session_event::connected:
        if (event.gen != sgen_) {
          leave_session();
          sgen_ = event.gen;
        }
        connected_ = true;
        verified_ = false;
        need_list_ = true;
        failures_ = 0;
        cancel_retry();
        return advance();
      case session_event::disconnected:
        if (event.gen != sgen_) return;
        connected_ = false;
        if (leader()) {
          // The session lives on the server until `timeout` after it last heard from us: keep
          // leading until the local deadline; a reconnect within the session extends it.
          const auto deadline = session_->lease_deadline(sgen_);
          const auto left =
              std::chrono::duration_cast<std::chrono::milliseconds>(deadline - steady::now());
          baton::detail::log(
              {.schedule = mutex_name(), .event = "lease.disconnected", .fence = mine_.fence})
              .warn(
                  "connection to ZooKeeper lost: keeping the lease for at most {} ms (its local "
                  "deadline) while the client reconnects within the session",
                  std::max<long long>(0, left.count()));
          if (deadline <= steady::now()) {
            step_down(release_reason::step_down);
          } else {
            arm_lease_timer(deadline);
          }
        }
        verified_ = false;
        if (running_) notify_error(make_error_code(errc::connection_lost));
        if (stopping_) cleanup();
        return;
      case session_event::expired:
        if (event.gen < sgen_) return;
        connected_ = false;
        if (leader())
          baton::detail::log().warn("mutex '{}': ZooKeeper session ended, stepping down",
                                    mutex_name());
        step_down(release_reason::lost);
        leave_session();
        if (running_) notify_error(make_error_code(errc::session_expired));
        if (stopping_) cleanup();
        return;
      default:
        return;
    }
  }

  // Our node (if any) belongs to a session that is gone: hand it to the session for deletion
  // (it may still live on the server if we gave the session up locally) and start afresh.
  void leave_session() {
    // (A request in flight may be a create that still makes a node.)
    if (!node_.empty() || uncertain_ || op_ != 0) session_->delete_abandoned(dir_, guid_);
    node_.clear();
    uncertain_ = verified_ = await_heartbeat_ = false;
    guid_ = make_guid();
    remove_watch();
    op_ = 0;  // a request of the old session is of no interest any more
  }

  // ---- errors and retries --------------------------------------------------------------------

  void on_failure(int rc, const char* what) {
    if (stopping_) {
      if (connection_trouble(rc)) return retry_after(options().retry_period);
      leave_session();  // give up here; the session deletes what may be left of our node
      return finish();
    }
    const auto ec = translate(rc);
    notify_error(ec);
    if (session_gone(rc)) return;  // the session event that follows restarts us
    ++failures_;
    if (connection_trouble(rc))
      baton::detail::log().debug("mutex '{}': {} failed: {}", mutex_name(), what, zerror(rc));
    else if (failures_ == 1)
      baton::detail::log().warn("mutex '{}': {} failed: {} ({}); retrying", mutex_name(), what,
                                zerror(rc), ec.message());
    auto delay = options().retry_period;
    for (unsigned i = 1; i < failures_ && delay < options().max_backoff; ++i) delay *= 2;
    retry_after(std::min(delay, options().max_backoff));
  }

  void retry_after(std::chrono::milliseconds delay) {
    retry_pending_ = true;
    const auto seq = ++retry_seq_;
    retry_timer_.expires_after(delay);
    retry_timer_.async_wait([weak = weak_self(), seq](boost::system::error_code) {
      auto self = weak.lock();
      if (!self || seq != self->retry_seq_) return;
      self->retry_pending_ = false;
      self->advance();
    });
  }

  void cancel_retry() {
    ++retry_seq_;
    retry_pending_ = false;
    retry_timer_.cancel();
  }

  void remove_watch() {
    ++watch_seq_;
    if (watch_token_ != 0) session_->watches().remove(watch_token_);
    watch_token_ = 0;
  }

  // ---- stop ----------------------------------------------------------------------------------

  // Deletes our node, retrying until it is gone or the session is gone, then calls stop_done_.
  void cleanup() {
    if (!connected_ || (node_gen_ != session_->generation() && !node_.empty())) {
      // No waiting for a connection: the session deletes whatever is left of our node (also one
      // a queued create may still make) as soon as it is connected again.
      if (op_ != 0 || !node_.empty() || uncertain_) session_->delete_abandoned(dir_, guid_);
      op_ = 0;
      node_.clear();
      uncertain_ = false;
      return finish();
    }
    if (op_ != 0 || retry_pending_) return;  // their completion comes back here
    if (node_.empty() && !uncertain_) return finish();
    if (uncertain_) return do_find();
    session_->remove(sgen_, node_path(), bind(&zk_contend_service::on_removed));
  }

  void on_removed(const op_result& r) {
    if (r.rc == ZOK || r.rc == ZNONODE) {
      node_.clear();
      return finish();
    }
    if (connection_trouble(r.rc)) return retry_after(options().retry_period);
    if (!session_gone(r.rc))
      baton::detail::log().warn("mutex '{}': could not delete lock node {}: {}", mutex_name(),
                                node_, zerror(r.rc));
    leave_session();
    finish();
  }

  void finish() {
    if (!stopping_) return;
    stopping_ = false;
    remove_watch();
    session_->unsubscribe(key());
    auto done = std::move(stop_done_);
    stop_done_ = nullptr;
    if (done) done();
  }

  std::shared_ptr<session> session_;
  const std::string dir_;
  std::shared_ptr<proxy> proxy_;
  boost::asio::steady_timer lease_timer_;
  boost::asio::steady_timer retry_timer_;
  boost::asio::steady_timer clock_timer_;

  // Strand only.
  bool running_ = false;
  bool stopping_ = false;
  std::function<void()> stop_done_;
  std::uint64_t sgen_ = 0;  // session generation we work in
  std::uint64_t seq_ = 0;   // last session state event applied
  bool connected_ = false;
  std::string guid_;
  std::string node_;  // our lock node (name only), empty if none
  std::uint64_t node_gen_ = 0;
  struct Stat node_stat_ {};
  bool uncertain_ = false;  // a create may have succeeded without us knowing the name
  bool verified_ = false;   // node_ checked to exist in our session since the last (re)connect
  bool need_list_ = false;
  bool await_heartbeat_ = false;
  bool heartbeats_ = false;  // want_heartbeats() last said
  std::uint64_t op_ = 0;     // token of the request in flight
  std::uint64_t op_counter_ = 0;
  std::uint64_t watch_token_ = 0;
  std::uint64_t watch_seq_ = 0;
  std::uint64_t lease_seq_ = 0;
  // The session generation of the current ownership, 0 when none (read by lease_deadline()
  // from any thread).
  std::atomic<std::uint64_t> lease_gen_{0};
  std::uint64_t retry_seq_ = 0;
  std::uint64_t clock_seq_ = 0;
  steady::time_point handover_at_{};  // a refused owner keeps its node until then
  std::chrono::system_clock::time_point create_sent_{};  // wall clock when the create was sent
  bool retry_pending_ = false;
  unsigned failures_ = 0;
  std::string predecessor_, lowest_;
  mutex_owner observed_;
  mutex_owner mine_;
};

}  // namespace

std::shared_ptr<contend_service> make_contend_service(std::shared_ptr<session> session,
                                                      std::string name, std::string contender_id,
                                                      std::shared_ptr<mutex_contender> contender,
                                                      contend_options options) {
  return std::make_shared<zk_contend_service>(
      std::move(session), std::move(name), std::move(contender_id), std::move(contender), options);
}

}  // namespace baton::backends::zookeeper::detail
