// One ZooKeeper session per backend: the handle, its state machine (connected, disconnected,
// expired, locally expired), the heartbeat behind every owner's local lease, and the bridge from
// the client's C callbacks onto our strands.
#include "session.hpp"

#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>

#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/errc.hpp"
#include "baton/mutex/metrics.hpp"
#include "baton/mutex/stats.hpp"

namespace baton::backends::zookeeper::detail {

using std::chrono::milliseconds;

struct handle_ctx;

// One asynchronous call: what to send, and the completion context the client hands back.
struct zk_request {
  std::shared_ptr<handle_ctx> handle;
  std::int64_t sent = 0;  // steady ns, when handed to the client
  op_handler handler;
  std::function<int(zhandle_t*, zk_request*)> call;  // hands the request to the client
  bool counted = false;                              // holds one of the handle's flow slots
  bool lock_create = false;
  // check_and_set
  std::string check_path, set_path, data;
  zoo_op_t ops[2];
  zoo_op_result_t results[2];
  struct Stat set_stat {};
  char created[1024] = {};  // check_and_create: the created path
};

// Per handle; the watcher context of the handle and of every watch set through it. Lives until
// zookeeper_close() of its handle has returned.
//
// Flow control: at most max_requests_in_flight requests are in the client (queued in it or
// waiting for the server's answer) at once; the others wait here, in order, and go out as
// answers come back. The server answers a session's requests in order, so a request sent now is
// answered after at most that many others: the heartbeat, which skips this queue, proves the
// session alive within milliseconds even while 50,000 lock nodes are being created, instead of
// after all of them (which took longer than the session timeout: every owner stepped down).
struct handle_ctx {
  explicit handle_ctx(session::strand_type s) : strand(std::move(s)) {}
  std::uint64_t gen = 0;
  std::weak_ptr<session> owner;
  session::strand_type strand;
  std::shared_ptr<watch_table> watches;
  std::shared_ptr<stats_block> stats;
  std::atomic<std::int64_t> last_answer{0};  // steady ns: send time of the latest answered call
  std::atomic<int> negotiated_ms{0};
  std::atomic<std::int64_t> client_id{0};

  /// Sends `req` (or queues it behind the requests in flight; `urgent` ones never wait).
  /// A request that cannot be sent completes inline with the client's return code.
  void submit(std::unique_ptr<zk_request> req, bool urgent);
  /// A counted request completed: its slot goes to the next waiting request.
  void release_slot();
  /// Sends nothing more (before zookeeper_close()); waiting requests fail with `rc`.
  void close(int rc);

  std::mutex flow_mutex;    // guards the fields below; held while handing a request to the client
  zhandle_t* zh = nullptr;  // null once closed
  int closed_rc = ZCLOSING;
  unsigned in_flight = 0;
  std::deque<std::unique_ptr<zk_request>> waiting;
};

namespace {

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now().time_since_epoch())
      .count();
}

// ---- logging: the client's lines go to our logger at debug level -------------------------------

void forward_client_log(const char* message) {
  if (message == nullptr) return;
  std::string_view line(message);
  // "2024-01-01 10:00:00,123:4242(0x7f..):ZOO_INFO@func@123: text" -> "ZOO_INFO@func@123: text"
  if (auto pos = line.find(":ZOO_"); pos != std::string_view::npos) line.remove_prefix(pos + 1);
  while (!line.empty() && (line.back() == '\n' || line.back() == '\r')) line.remove_suffix(1);
  baton::detail::log().debug("zookeeper client: {}", line);
}

ssize_t log_stream_write(void*, const char* buffer, size_t size) {
  thread_local std::string pending;
  pending.append(buffer, size);
  for (auto nl = pending.find('\n'); nl != std::string::npos; nl = pending.find('\n')) {
    forward_client_log(pending.substr(0, nl).c_str());
    pending.erase(0, nl + 1);
  }
  return static_cast<ssize_t>(size);
}

void install_client_logging() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Lines logged without a handle go to the log stream: route it to our logger too.
    cookie_io_functions_t io{nullptr, &log_stream_write, nullptr, nullptr};
    if (FILE* stream = fopencookie(nullptr, "w", io)) {
      setvbuf(stream, nullptr, _IOLBF, 0);
      zoo_set_log_stream(stream);
    }
  });
  // The reconnect loop logs at ERROR every ~33 ms: keep the client quiet unless we debug.
  zoo_set_debug_level(baton::detail::log().should_log(spdlog::level::debug) ? ZOO_LOG_LEVEL_INFO
                                                                            : ZOO_LOG_LEVEL_ERROR);
}

// ---- completions -----------------------------------------------------------------------------

constexpr std::string_view metrics_type = "zookeeper";

// A request failed when the server did not answer it (connection, timeout, session gone,
// throttled) or refused it for authorization. Other answers (no node, bad version, node exists)
// are results the caller acts on, not failures.
bool failed_request(int rc) noexcept {
  return !server_answered(rc) || rc == ZNOAUTH || rc == ZINVALIDACL;
}

void finish(const void* data, op_result result) {
  std::unique_ptr<zk_request> ctx(static_cast<zk_request*>(const_cast<void*>(data)));
  baton::detail::record_backend_request(metrics_type,
                                        std::chrono::nanoseconds{now_ns() - ctx->sent});
  auto& h = *ctx->handle;
  if (ctx->counted) h.release_slot();
  if (server_answered(result.rc) && !h.stats->unproven_answers.load()) {
    auto last = h.last_answer.load();
    while (last < ctx->sent && !h.last_answer.compare_exchange_weak(last, ctx->sent)) {
    }
  }
  if (ctx->lock_create && result.rc == ZOK) {
    ++h.stats->nodes_created;
    auto pending = h.stats->lost_create_replies.load();
    while (pending > 0 &&
           !h.stats->lost_create_replies.compare_exchange_weak(pending, pending - 1)) {
    }
    if (pending > 0) {  // fault injection: the node exists, the reply is "lost"
      result = op_result{};
      result.rc = ZCONNECTIONLOSS;
    }
  }
  if (result.rc != ZOK && failed_request(result.rc))
    baton::detail::record_backend_error(metrics_type, translate(result.rc));
  try {
    ctx->handler(std::move(result));
  } catch (const std::exception& e) {
    baton::detail::log().error("zookeeper: completion handler threw: {}", e.what());
  } catch (...) {
    baton::detail::log().error("zookeeper: completion handler threw");
  }
}

void string_stat_done(int rc, const char* path, const struct Stat* stat, const void* data) {
  op_result r;
  r.rc = rc;
  if (rc == ZOK) {
    if (path) r.path = path;
    if (stat) r.stat = *stat;
  }
  finish(data, std::move(r));
}

void strings_done(int rc, const struct String_vector* strings, const void* data) {
  op_result r;
  r.rc = rc;
  if (rc == ZOK && strings)
    for (int i = 0; i < strings->count; ++i) r.children.emplace_back(strings->data[i]);
  finish(data, std::move(r));
}

void stat_done(int rc, const struct Stat* stat, const void* data) {
  op_result r;
  r.rc = rc;
  if (rc == ZOK && stat) r.stat = *stat;
  finish(data, std::move(r));
}

void data_done(int rc, const char* value, int length, const struct Stat* stat, const void* data) {
  op_result r;
  r.rc = rc;
  if (rc == ZOK) {
    if (value && length > 0) r.data.assign(value, static_cast<std::size_t>(length));
    if (stat) r.stat = *stat;
  }
  finish(data, std::move(r));
}

void void_done(int rc, const void* data) {
  op_result r;
  r.rc = rc;
  finish(data, std::move(r));
}

// check_and_create: which operation failed, and the created path.
void multi_done(int rc, const void* data) {
  const auto* ctx = static_cast<const zk_request*>(data);
  op_result r;
  r.rc = rc;
  if (rc == ZOK) {
    r.path = ctx->created;
  } else {
    for (int i = 0; i < 2; ++i)
      if (ctx->results[i].err != ZOK && ctx->results[i].err != ZRUNTIMEINCONSISTENCY) {
        r.failed_op = i;
        break;
      }
  }
  finish(data, std::move(r));
}

void auth_done(int rc, const void* data) {
  std::unique_ptr<std::string> user(static_cast<std::string*>(const_cast<void*>(data)));
  if (rc != ZOK)
    baton::detail::log().error("zookeeper: digest authentication as '{}' failed: {}", *user,
                               zerror(rc));
}

// A data watch left by get(watch_it = true) fired: wake whoever watches that path.
void node_watcher(zhandle_t*, int type, int, const char* path, void* context) {
  if (type == ZOO_SESSION_EVENT || path == nullptr || context == nullptr) return;
  auto* h = static_cast<handle_ctx*>(context);
  h->watches->fire(h->gen, path);
}

const char* state_name(int state) {
  if (state == ZOO_CONNECTED_STATE) return "connected";
  if (state == ZOO_CONNECTING_STATE) return "connecting";
  if (state == ZOO_ASSOCIATING_STATE) return "associating";
  if (state == ZOO_EXPIRED_SESSION_STATE) return "expired";
  if (state == ZOO_AUTH_FAILED_STATE) return "auth failed";
  return "other";
}

}  // namespace

// ---- translation and classification ----------------------------------------------------------

std::error_code translate(int rc) {
  switch (rc) {
    case ZOK:
      return {};
    case ZCONNECTIONLOSS:
    case ZSSLCONNECTIONERROR:
      return make_error_code(errc::connection_lost);
    case ZOPERATIONTIMEOUT:
      return make_error_code(errc::timeout);
    case ZSESSIONEXPIRED:
    case ZINVALIDSTATE:  // every call fails so after EXPIRED
    case ZSESSIONMOVED:
      return make_error_code(errc::session_expired);
    case ZNOAUTH:
    case ZAUTHFAILED:
    case ZSESSIONCLOSEDREQUIRESASLAUTH:
      return make_error_code(errc::auth_failed);
    case ZCLOSING:
      return make_error_code(errc::stopped);
    case ZNONODE:      // a conditional write found the owner node gone
    case ZBADVERSION:  // or changed
      return make_error_code(errc::not_owner);
    case ZBADARGUMENTS:
    case ZINVALIDACL:
      return make_error_code(errc::invalid_argument);
    case ZMARSHALLINGERROR:
      return make_error_code(errc::bad_reply);
    default:  // ZSYSTEMERROR, ZRUNTIMEINCONSISTENCY, ZTHROTTLEDOP, ZNODEEXISTS, ZNOTEMPTY, ...
      return make_error_code(errc::backend_error);
  }
}

bool server_answered(int rc) noexcept {
  switch (rc) {
    case ZOK:
    case ZNONODE:
    case ZNOAUTH:
    case ZBADVERSION:
    case ZNOCHILDRENFOREPHEMERALS:
    case ZNODEEXISTS:
    case ZNOTEMPTY:
    case ZINVALIDACL:
      return true;
    default:
      return false;
  }
}

bool connection_trouble(int rc) noexcept {
  return rc == ZCONNECTIONLOSS || rc == ZOPERATIONTIMEOUT || rc == ZSSLCONNECTIONERROR ||
         rc == ZTHROTTLEDOP || rc == ZSYSTEMERROR;
}

bool session_gone(int rc) noexcept {
  return rc == ZSESSIONEXPIRED || rc == ZINVALIDSTATE || rc == ZCLOSING || rc == ZSESSIONMOVED ||
         rc == ZAUTHFAILED;
}

mutex_owner owner_record(const std::string& owner_id, const struct Stat& stat,
                         milliseconds session_timeout) {
  mutex_owner o;
  o.owner_id = owner_id;
  o.fence = static_cast<std::uint64_t>(stat.czxid);
  o.acquired_at = backend_time{milliseconds{stat.ctime}};
  auto now = std::chrono::floor<milliseconds>(std::chrono::system_clock::now());
  auto base = std::max(now, o.acquired_at);
  o.ttl_at = base + session_timeout / 3;
  o.transition_at = base + session_timeout;
  return o;
}

// ---- watch table -----------------------------------------------------------------------------

std::uint64_t watch_table::add(std::uint64_t gen, std::string path, std::function<void()> wake) {
  std::lock_guard lock(mutex_);
  auto token = next_++;
  entries_.emplace(token, entry{gen, std::move(path), std::move(wake)});
  return token;
}

void watch_table::remove(std::uint64_t token) noexcept {
  std::lock_guard lock(mutex_);
  entries_.erase(token);
}

void watch_table::fire(std::uint64_t gen, const std::string& path) {
  std::vector<std::function<void()>> wakes;
  {
    std::lock_guard lock(mutex_);
    for (auto it = entries_.begin(); it != entries_.end();) {
      if (it->second.gen == gen && it->second.path == path) {
        wakes.push_back(std::move(it->second.wake));
        it = entries_.erase(it);
      } else {
        ++it;
      }
    }
  }
  stats_->watch_events += wakes.size();
  for (auto& w : wakes) w();
}

void watch_table::drop_older(std::uint64_t gen) {
  std::lock_guard lock(mutex_);
  std::erase_if(entries_, [gen](const auto& e) { return e.second.gen < gen; });
}

// ---- session ---------------------------------------------------------------------------------

std::shared_ptr<session> session::create(settings config, runtime& rt) {
  auto s = std::make_shared<session>(std::move(config), rt);
  s->open_handle();
  return s;
}

session::session(settings config, runtime& rt)
    : settings_(std::move(config)),
      rt_(rt),
      strand_(boost::asio::make_strand(rt.io())),
      stats_(std::make_shared<stats_block>()),
      watches_(std::make_shared<watch_table>(stats_)),
      heartbeat_timer_(strand_),
      expiry_timer_(strand_),
      connect_timer_(strand_),
      rebuild_timer_(strand_),
      lapse_timer_(strand_) {}

session::~session() {
  zhandle_t* zh = nullptr;
  std::shared_ptr<handle_ctx> ctx;
  {
    std::unique_lock lock(handle_mutex_);
    std::swap(zh, zh_);
    ctx.swap(ctx_);
  }
  if (ctx) ctx->close(ZCLOSING);
  // Closing while connected ends the session on the server at once: our nodes go away now.
  if (zh) zookeeper_close(zh);
}

void session::session_watcher(zhandle_t*, int type, int state, const char*, void* context) {
  if (type != ZOO_SESSION_EVENT || context == nullptr) return;
  auto* h = static_cast<handle_ctx*>(context);
  boost::asio::post(h->strand, [weak = h->owner, gen = h->gen, state] {
    if (auto self = weak.lock()) self->on_state(gen, state);
  });
}

void session::open_handle() {
  install_client_logging();
  auto ctx = std::make_shared<handle_ctx>(strand_);
  ctx->owner = weak_from_this();
  ctx->watches = watches_;
  ctx->stats = stats_;
  std::uint64_t gen = 0;
  {
    // Held across init so that on_state() (which takes it shared) sees the new handle.
    std::unique_lock handle_lock(handle_mutex_);
    {
      std::lock_guard lock(state_mutex_);
      gen = gen_ + 1;
    }
    ctx->gen = gen;
    ever_connected_ = false;  // on_state() cannot run before we release handle_mutex_
    errno = 0;
    zhandle_t* zh = zookeeper_init2(settings_.hosts.c_str(), &session::session_watcher,
                                    static_cast<int>(settings_.session_timeout.count()), nullptr,
                                    ctx.get(), ZOO_NO_LOG_CLIENTENV, &forward_client_log);
    if (zh == nullptr) {
      int err = errno;
      throw std::runtime_error("zookeeper backend: cannot create a client for hosts '" +
                               settings_.hosts +
                               "': " + (err ? std::strerror(err) : "unknown error") +
                               (err == EINVAL ? " (a host name that does not resolve?)" : ""));
    }
    if (!settings_.username.empty()) {
      std::string cert = settings_.username + ":" + settings_.password;
      auto* user = new std::string(settings_.username);
      if (zoo_add_auth(zh, "digest", cert.data(), static_cast<int>(cert.size()), &auth_done,
                       user) != ZOK)
        delete user;
    }
    {
      std::lock_guard flow(ctx->flow_mutex);
      ctx->zh = zh;
    }
    zh_ = zh;
    ctx_ = ctx;
    std::lock_guard lock(state_mutex_);
    gen_ = gen;
    connected_ = false;
    ++seq_;
  }
  connected_cv_.notify_all();
  ++stats_->sessions;
  watches_->drop_older(gen);
  // A server we cannot reach is logged once, clearly, after the session timeout. (Armed on the
  // strand: open_handle() also runs in create(), off the strand.)
  boost::asio::post(strand_, [weak = weak_from_this(), gen] {
    auto self = weak.lock();
    if (!self || self->generation() != gen) return;
    self->connect_timer_.expires_after(self->settings_.session_timeout);
    self->connect_timer_.async_wait([weak, gen](boost::system::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || self->generation() != gen || self->connected()) return;
      if (!self->warned_unreachable_) {
        self->warned_unreachable_ = true;
        baton::detail::log().warn(
            "zookeeper: cannot connect to {} for {} ms; still trying (operations fail with "
            "connection_lost meanwhile)",
            self->settings_.hosts, self->settings_.session_timeout.count());
      }
    });
  });
}

void session::on_state(std::uint64_t gen, int state) {
  {
    std::shared_lock lock(handle_mutex_);
    if (!ctx_ || ctx_->gen != gen) return;  // an event of an old handle
    if (state == ZOO_CONNECTED_STATE) {
      ctx_->negotiated_ms = zoo_recv_timeout(zh_);
      last_negotiated_ms_ = ctx_->negotiated_ms.load();
      if (const clientid_t* id = zoo_client_id(zh_)) ctx_->client_id = id->client_id;
    }
  }
  baton::detail::log().debug("zookeeper: session event '{}' (generation {})", state_name(state),
                             gen);
  if (state == ZOO_CONNECTED_STATE) {
    connect_timer_.cancel();
    expiry_timer_.cancel();
    const bool first = !ever_connected_;
    ever_connected_ = true;
    warned_unreachable_ = false;
    rebuild_failures_ = 0;
    std::int64_t id = 0;
    {
      std::shared_lock lock(handle_mutex_);
      id = ctx_->client_id;
    }
    if (first)
      baton::detail::log().info(
          "zookeeper: connected to {} (session 0x{:x}, timeout {} ms, asked {} ms)",
          settings_.hosts, id, session_timeout().count(), settings_.session_timeout.count());
    else
      baton::detail::log().info("zookeeper: reconnected to {} within session 0x{:x}",
                                settings_.hosts, id);
    broadcast(session_event::connected);
    connected_cv_.notify_all();
    heartbeat(gen);
    arm_lapse(gen);
    clean_abandoned();
  } else if (state == ZOO_CONNECTING_STATE || state == ZOO_ASSOCIATING_STATE) {
    bool was_connected = false;
    {
      std::lock_guard lock(state_mutex_);
      was_connected = connected_;
    }
    if (!was_connected) return;
    ++stats_->disconnects;
    baton::detail::log().warn(
        "zookeeper: connection to {} lost; reconnecting (the session lasts {} ms without a "
        "connection; owners keep their lease until its local deadline)",
        settings_.hosts, session_timeout().count());
    broadcast(session_event::disconnected);
    arm_local_expiry(gen);
  } else if (state == ZOO_EXPIRED_SESSION_STATE) {
    baton::detail::log().warn("zookeeper: session expired; starting a new session");
    rebuild("expired");
  } else if (state == ZOO_AUTH_FAILED_STATE) {
    baton::detail::log().error(
        "zookeeper: authentication failed at {}; retrying with a new session", settings_.hosts);
    rebuild("authentication failed");
  }
}

void session::broadcast(session_event::kind_type kind) {
  session_event event;
  std::vector<std::shared_ptr<session_listener>> targets;
  {
    std::lock_guard lock(state_mutex_);
    if (kind == session_event::connected) {
      connected_ = true;
      ++seq_;
    } else if (kind == session_event::disconnected || kind == session_event::expired) {
      connected_ = false;
      ++seq_;
    }
    event.kind = kind;
    event.gen = gen_;
    event.seq = seq_;
    const bool periodic = kind == session_event::heartbeat || kind == session_event::lapsed;
    const auto now = periodic ? steady::now() : steady::time_point{};
    auto collect = [&](auto& from) {
      for (auto it = from.begin(); it != from.end();) {
        if (auto l = it->second.lock()) {
          if (!periodic || l->wants(kind, now)) targets.push_back(std::move(l));
          ++it;
        } else {
          it = from.erase(it);
        }
      }
    };
    if (periodic)
      collect(heartbeat_listeners_);
    else
      collect(listeners_);
  }
  if (kind == session_event::heartbeat) stats_->heartbeat_events += targets.size();
  for (auto& t : targets) t->on_session_event(event);
}

void session::arm_local_expiry(std::uint64_t gen) {
  // The server ends the session `timeout` after it last heard from us; we cannot know more than
  // the send time of our latest answered request. Past that, without a connection, we give the
  // session up ourselves (EXPIRED would only come after a reconnect).
  steady::time_point last = steady::now();
  {
    std::shared_lock lock(handle_mutex_);
    if (ctx_ && ctx_->last_answer != 0)
      last = steady::time_point{std::chrono::nanoseconds{ctx_->last_answer.load()}};
  }
  expiry_timer_.expires_at(last + session_timeout());
  expiry_timer_.async_wait([weak = weak_from_this(), gen](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->generation() != gen || self->connected()) return;
    ++self->stats_->local_expiries;
    baton::detail::log().warn(
        "zookeeper: no connection to {} for longer than the session timeout ({} ms): the session "
        "is presumed expired, starting a new one",
        self->settings_.hosts, self->session_timeout().count());
    self->rebuild("presumed expired");
  });
}

void session::rebuild(const char* why) {
  zhandle_t* old = nullptr;
  std::shared_ptr<handle_ctx> old_ctx;
  {
    std::unique_lock lock(handle_mutex_);
    std::swap(old, zh_);
    old_ctx.swap(ctx_);
  }
  heartbeat_timer_.cancel();
  ++heartbeat_seq_;
  lapse_timer_.cancel();
  ++lapse_seq_;
  expiry_timer_.cancel();
  connect_timer_.cancel();
  {
    std::lock_guard lock(state_mutex_);
    known_dirs_.clear();
  }
  if (old_ctx) old_ctx->close(ZSESSIONEXPIRED);
  broadcast(session_event::expired);  // carries the old generation
  if (old) {
    // zookeeper_close() joins the client's threads: not on an io thread.
    boost::asio::post(rt_.blocking(), [old, old_ctx] { zookeeper_close(old); });
  }
  try {
    open_handle();
  } catch (const std::exception& e) {
    ++rebuild_failures_;
    auto delay = std::min<milliseconds>(milliseconds{250} * (1u << std::min(rebuild_failures_, 6u)),
                                        milliseconds{10'000});
    baton::detail::log().error("zookeeper: {} (after: {}); retrying in {} ms", e.what(), why,
                               delay.count());
    rebuild_timer_.expires_after(delay);
    rebuild_timer_.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
      auto self = weak.lock();
      if (ec || !self) return;
      std::shared_lock lock(self->handle_mutex_);
      if (self->zh_ != nullptr) return;
      lock.unlock();
      self->rebuild("retry");
    });
  }
}

void session::heartbeat(std::uint64_t gen) {
  auto seq = ++heartbeat_seq_;
  if (!connected() || generation() != gen) return;
  auto weak = weak_from_this();
  // The cheapest request there is; its answer proves the session alive at its send time.
  exists(
      gen, "/",
      [weak, gen, strand = strand_](op_result r) {
        boost::asio::post(strand, [weak, gen, rc = r.rc] {
          if (auto self = weak.lock()) self->on_heartbeat(gen, rc);
        });
      },
      /*urgent=*/true);
  heartbeat_timer_.expires_after(heartbeat_period());
  heartbeat_timer_.async_wait([weak, gen, seq](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->heartbeat_seq_ != seq) return;
    self->heartbeat(gen);
  });
}

void session::arm_lapse(std::uint64_t gen) {
  // At the lease deadline of `gen`; while there is none (nothing answered yet) or it has passed,
  // again a heartbeat period later. Every answer moves the deadline on: when the timer finds a
  // later one it only re-arms, so it fires about once per (timeout - margin - timeout/3).
  const auto seq = ++lapse_seq_;
  const auto now = steady::now();
  const auto deadline = lease_deadline(gen);
  lapse_timer_.expires_at(deadline > now ? deadline : now + heartbeat_period());
  lapse_timer_.async_wait([weak = weak_from_this(), gen, seq](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->lapse_seq_ != seq || self->generation() != gen) return;
    const auto deadline = self->lease_deadline(gen);
    if (deadline != steady::time_point{} && deadline <= steady::now()) {
      ++self->stats_->lapses;
      self->broadcast(session_event::lapsed);
    }
    self->arm_lapse(gen);
  });
}

void session::on_heartbeat(std::uint64_t gen, int rc) {
  if (!server_answered(rc) || generation() != gen) return;
  ++stats_->heartbeats;
  broadcast(session_event::heartbeat);
}

bool session::wait_connected(milliseconds timeout) {
  std::unique_lock lock(state_mutex_);
  return connected_cv_.wait_for(lock, timeout, [&] { return connected_; });
}

bool session::connected() const {
  std::lock_guard lock(state_mutex_);
  return connected_;
}

std::uint64_t session::generation() const {
  std::lock_guard lock(state_mutex_);
  return gen_;
}

milliseconds session::session_timeout() const {
  if (int ms = last_negotiated_ms_.load(); ms > 0) return milliseconds{ms};
  return settings_.session_timeout;
}

std::int64_t session::client_id(std::uint64_t gen) const {
  std::shared_lock lock(handle_mutex_);
  return ctx_ && ctx_->gen == gen ? ctx_->client_id.load() : 0;
}

steady::time_point session::lease_deadline(std::uint64_t gen) const {
  std::int64_t last = 0;
  int negotiated = 0;
  {
    std::shared_lock lock(handle_mutex_);
    if (!ctx_ || ctx_->gen != gen) return {};
    last = ctx_->last_answer;
    negotiated = ctx_->negotiated_ms;
  }
  if (last == 0) return {};
  return session_lease_deadline(steady::time_point{std::chrono::nanoseconds{last}},
                                milliseconds{negotiated});
}

session_snapshot session::subscribe(std::uint64_t key, std::weak_ptr<session_listener> listener) {
  std::lock_guard lock(state_mutex_);
  listeners_[key] = std::move(listener);
  return session_snapshot{gen_, seq_, connected_};
}

void session::unsubscribe(std::uint64_t key) noexcept {
  std::lock_guard lock(state_mutex_);
  listeners_.erase(key);
  heartbeat_listeners_.erase(key);
}

void session::want_heartbeats(std::uint64_t key, bool on) {
  std::lock_guard lock(state_mutex_);
  if (!on) {
    heartbeat_listeners_.erase(key);
    return;
  }
  if (auto it = listeners_.find(key); it != listeners_.end())
    heartbeat_listeners_[key] = it->second;
}

// ---- flow control ----------------------------------------------------------------------------

namespace {

void fail_request(std::unique_ptr<zk_request> req, int rc) {
  baton::detail::record_backend_error(metrics_type, translate(rc));
  op_result r;
  r.rc = rc;
  auto handler = std::move(req->handler);
  req.reset();
  handler(std::move(r));
}

// Under the flow mutex, with a handle: hands `req` to the client. On success the completion owns
// it (and may already have freed it).
int send_locked(zhandle_t* zh, std::unique_ptr<zk_request>& req) {
  req->sent = now_ns();
  int rc = req->call(zh, req.get());
  baton::detail::count_backend_requests();
  if (rc == ZOK) req.release();
  return rc;
}

}  // namespace

void handle_ctx::submit(std::unique_ptr<zk_request> req, bool urgent) {
  int rc = ZOK;
  {
    std::lock_guard lock(flow_mutex);
    if (zh == nullptr) {
      rc = closed_rc;
    } else if (!urgent && in_flight >= max_requests_in_flight) {
      req->counted = true;
      waiting.push_back(std::move(req));
      if (waiting.size() > stats->peak_waiting) stats->peak_waiting = waiting.size();
      return;
    } else {
      req->counted = !urgent;
      if (req->counted && ++in_flight > stats->peak_in_flight) stats->peak_in_flight = in_flight;
      rc = send_locked(zh, req);
      if (rc == ZOK) return;
      if (req->counted) --in_flight;
    }
  }
  fail_request(std::move(req), rc);
}

void handle_ctx::release_slot() {
  std::vector<std::pair<std::unique_ptr<zk_request>, int>> failed;
  {
    std::lock_guard lock(flow_mutex);
    if (in_flight > 0) --in_flight;
    while (in_flight < max_requests_in_flight && !waiting.empty()) {
      auto req = std::move(waiting.front());
      waiting.pop_front();
      ++in_flight;
      int rc = send_locked(zh, req);
      if (rc != ZOK) {
        --in_flight;
        failed.emplace_back(std::move(req), rc);
      }
    }
  }
  for (auto& [req, rc] : failed) fail_request(std::move(req), rc);
}

void handle_ctx::close(int rc) {
  std::deque<std::unique_ptr<zk_request>> dropped;
  {
    std::lock_guard lock(flow_mutex);
    zh = nullptr;
    closed_rc = rc;
    dropped.swap(waiting);
  }
  for (auto& req : dropped) fail_request(std::move(req), rc);
}

void session::submit(std::uint64_t gen, op_handler handler, send_call call, bool urgent) {
  auto req = std::make_unique<zk_request>();
  req->handler = std::move(handler);
  req->call = std::move(call);
  {
    std::shared_lock lock(handle_mutex_);
    if (zh_ != nullptr && (gen == 0 || ctx_->gen == gen)) req->handle = ctx_;
  }
  // No handle, or another generation: a failed request all the same.
  if (!req->handle) return fail_request(std::move(req), ZSESSIONEXPIRED);
  auto handle = req->handle;
  handle->submit(std::move(req), urgent);
}

void session::create_lock(std::uint64_t gen, const std::string& path, const std::string& data,
                          op_handler handler) {
  const auto* acl = settings_.username.empty() ? &ZOO_OPEN_ACL_UNSAFE : &ZOO_CREATOR_ALL_ACL;
  submit(gen, std::move(handler), [=](zhandle_t* zh, zk_request* ctx) {
    ctx->lock_create = true;
    return zoo_acreate2(zh, path.c_str(), data.data(), static_cast<int>(data.size()), acl,
                        ZOO_EPHEMERAL_SEQUENTIAL, &string_stat_done, ctx);
  });
}

void session::mark_known(const std::string& dir) {
  std::lock_guard lock(state_mutex_);
  known_dirs_.insert(dir);
}

void session::forget_dir(const std::string& dir) {
  std::lock_guard lock(state_mutex_);
  known_dirs_.erase(dir);
}

void session::ensure_path(std::uint64_t gen, const std::string& path, op_handler handler) {
  {
    std::lock_guard lock(state_mutex_);
    if (known_dirs_.count(path)) {
      handler(op_result{});
      return;
    }
  }
  const auto* acl = settings_.username.empty() ? &ZOO_OPEN_ACL_UNSAFE : &ZOO_CREATOR_ALL_ACL;
  auto done = [weak = weak_from_this(), strand = strand_, gen, path,
               handler = std::move(handler)](op_result r) mutable {
    if (r.rc == ZNODEEXISTS) r.rc = ZOK;
    if (r.rc != ZNONODE) {
      if (r.rc == ZOK)
        boost::asio::post(strand, [weak, path] {
          if (auto self = weak.lock()) self->mark_known(path);
        });
      handler(std::move(r));
      return;
    }
    // The parent is missing: create it first (on the strand, never holding the session here).
    boost::asio::post(strand, [weak, gen, path, handler = std::move(handler)]() mutable {
      auto self = weak.lock();
      auto parent = path.substr(0, path.rfind('/'));
      if (!self || parent.empty()) {
        op_result failed;
        failed.rc = self ? ZNONODE : ZCLOSING;
        handler(std::move(failed));
        return;
      }
      self->ensure_path(gen, parent,
                        [weak, strand = self->strand_, gen, path,
                         handler = std::move(handler)](op_result r) mutable {
                          if (r.rc != ZOK) return handler(std::move(r));
                          boost::asio::post(
                              strand, [weak, gen, path, handler = std::move(handler)]() mutable {
                                if (auto self = weak.lock())
                                  return self->ensure_path(gen, path, std::move(handler));
                                op_result closing;
                                closing.rc = ZCLOSING;
                                handler(std::move(closing));
                              });
                        });
    });
  };
  submit(gen, std::move(done), [=](zhandle_t* zh, zk_request* ctx) {
    return zoo_acreate2(zh, path.c_str(), nullptr, -1, acl, ZOO_PERSISTENT, &string_stat_done, ctx);
  });
}

void session::get_children(std::uint64_t gen, const std::string& path, op_handler handler) {
  submit(gen, std::move(handler), [=](zhandle_t* zh, zk_request* ctx) {
    return zoo_aget_children(zh, path.c_str(), 0, &strings_done, ctx);
  });
}

void session::exists(std::uint64_t gen, const std::string& path, op_handler handler, bool urgent) {
  submit(
      gen, std::move(handler),
      [=](zhandle_t* zh, zk_request* ctx) {
        return zoo_aexists(zh, path.c_str(), 0, &stat_done, ctx);
      },
      urgent);
}

void session::get(std::uint64_t gen, const std::string& path, bool watch_it, op_handler handler) {
  submit(gen, std::move(handler), [=](zhandle_t* zh, zk_request* ctx) {
    if (watch_it)
      return zoo_awget(zh, path.c_str(), &node_watcher, ctx->handle.get(), &data_done, ctx);
    return zoo_aget(zh, path.c_str(), 0, &data_done, ctx);
  });
}

void session::remove(std::uint64_t gen, const std::string& path, op_handler handler) {
  submit(gen, std::move(handler), [=](zhandle_t* zh, zk_request* ctx) {
    return zoo_adelete(zh, path.c_str(), -1, &void_done, ctx);
  });
}

void session::create(std::uint64_t gen, const std::string& path, const std::string& data, int flags,
                     op_handler handler) {
  const auto* acl = settings_.username.empty() ? &ZOO_OPEN_ACL_UNSAFE : &ZOO_CREATOR_ALL_ACL;
  submit(gen, std::move(handler), [=](zhandle_t* zh, zk_request* ctx) {
    return zoo_acreate2(zh, path.c_str(), data.data(), static_cast<int>(data.size()), acl, flags,
                        &string_stat_done, ctx);
  });
}

void session::set(std::uint64_t gen, const std::string& path, const std::string& data, int version,
                  op_handler handler) {
  submit(gen, std::move(handler), [=](zhandle_t* zh, zk_request* ctx) {
    return zoo_aset(zh, path.c_str(), data.data(), static_cast<int>(data.size()), version,
                    &stat_done, ctx);
  });
}

void session::exists_watch(std::uint64_t gen, const std::string& path, op_handler handler) {
  submit(gen, std::move(handler), [=](zhandle_t* zh, zk_request* ctx) {
    return zoo_awexists(zh, path.c_str(), &node_watcher, ctx->handle.get(), &stat_done, ctx);
  });
}

void session::check_and_create(std::uint64_t gen, const std::string& check_path,
                               const std::string& create_path, std::string data, int flags,
                               op_handler handler) {
  const auto* acl = settings_.username.empty() ? &ZOO_OPEN_ACL_UNSAFE : &ZOO_CREATOR_ALL_ACL;
  submit(gen, std::move(handler), [=](zhandle_t* zh, zk_request* ctx) {
    ctx->check_path = check_path;
    ctx->set_path = create_path;
    ctx->data = data;
    zoo_check_op_init(&ctx->ops[0], ctx->check_path.c_str(), -1);
    zoo_create_op_init(&ctx->ops[1], ctx->set_path.c_str(), ctx->data.data(),
                       static_cast<int>(ctx->data.size()), acl, flags, ctx->created,
                       sizeof ctx->created);
    return zoo_amulti(zh, 2, ctx->ops, ctx->results, &multi_done, ctx);
  });
}

void session::check_and_set(std::uint64_t gen, const std::string& check_path,
                            const std::string& set_path, std::string data, op_handler handler) {
  submit(gen, std::move(handler), [=](zhandle_t* zh, zk_request* ctx) {
    ctx->check_path = check_path;
    ctx->set_path = set_path;
    ctx->data = data;
    zoo_check_op_init(&ctx->ops[0], ctx->check_path.c_str(), -1);
    zoo_set_op_init(&ctx->ops[1], ctx->set_path.c_str(), ctx->data.data(),
                    static_cast<int>(ctx->data.size()), -1, &ctx->set_stat);
    return zoo_amulti(zh, 2, ctx->ops, ctx->results, &void_done, ctx);
  });
}

void session::read_clock(std::uint64_t gen, clock_handler handler) {
  std::optional<clock_reading> recent;
  {
    std::lock_guard lock(state_mutex_);
    if (clock_ && steady::now() - clock_at_ < clock_reading_reuse) {
      recent = clock_;
    } else {
      clock_waiters_.push_back(std::move(handler));
      if (clock_reading_out_) return;
      clock_reading_out_ = true;
    }
  }
  if (recent) return handler(*recent);
  const auto path = clock_path();
  auto weak = weak_from_this();
  auto fail = [weak, strand = strand_](int rc) {
    boost::asio::post(strand, [weak, rc] {
      clock_reading failed;
      failed.rc = rc;
      if (auto self = weak.lock()) self->clock_read(failed);
    });
  };
  // Handlers run on client threads: no strong reference to the session there, only posts.
  ensure_path(gen, path, [weak, strand = strand_, gen, path, fail](op_result r) {
    if (r.rc != ZOK) return fail(r.rc);
    boost::asio::post(strand, [weak, gen, path, fail] {
      auto self = weak.lock();
      if (!self) return;
      const auto sent = std::chrono::system_clock::now();
      self->set(gen, path, "", -1, [weak, strand = self->strand_, sent](op_result r) {
        clock_reading reading;
        reading.rc = r.rc;
        reading.mtime_ms = r.stat.mtime;
        reading.sent = sent;
        reading.received = std::chrono::system_clock::now();
        boost::asio::post(strand, [weak, reading] {
          if (auto self = weak.lock()) self->clock_read(reading);
        });
      });
    });
  });
}

void session::clock_read(clock_reading reading) {
  if (reading.rc == ZNONODE) forget_dir(clock_path());  // deleted by someone: create it again
  std::vector<clock_handler> waiters;
  {
    std::lock_guard lock(state_mutex_);
    clock_reading_out_ = false;
    waiters.swap(clock_waiters_);
    if (reading.rc == ZOK) {
      clock_ = reading;
      clock_at_ = steady::now();
    }
  }
  for (auto& w : waiters) w(reading);
}

void session::delete_abandoned(const std::string& dir, const std::string& guid) {
  {
    std::lock_guard lock(state_mutex_);
    abandoned_.emplace_back(dir, guid);
  }
  boost::asio::post(strand_, [weak = weak_from_this()] {
    if (auto self = weak.lock()) self->clean_abandoned();
  });
}

void session::clean_abandoned() {
  std::vector<std::pair<std::string, std::string>> work;
  std::uint64_t gen = 0;
  {
    std::lock_guard lock(state_mutex_);
    if (!connected_ || abandoned_.empty()) return;
    work.swap(abandoned_);
    gen = gen_;
  }
  auto weak = weak_from_this();
  for (auto& [dir, guid] : work) {
    auto retry_later = [weak, strand = strand_, dir = dir, guid = guid] {
      boost::asio::post(strand, [weak, dir, guid] {
        if (auto self = weak.lock()) {
          std::lock_guard lock(self->state_mutex_);
          self->abandoned_.emplace_back(dir, guid);
        }
      });
    };
    get_children(
        gen, dir,
        [weak, strand = strand_, gen, dir = dir, prefix = lock_prefix(guid),
         retry_later](op_result r) {
          if (connection_trouble(r.rc)) return retry_later();
          if (r.rc != ZOK) return;  // no folder, or the session went: nothing of ours is left
          boost::asio::post(strand, [weak, gen, dir, prefix, children = std::move(r.children)] {
            auto self = weak.lock();
            if (!self) return;
            for (const auto& child : children) {
              if (child.rfind(prefix, 0) != 0) continue;
              self->remove(gen, dir + "/" + child, [stats = self->stats_](op_result r) {
                if (r.rc == ZOK) ++stats->ghosts_deleted;
              });
            }
          });
        });
  }
}

bool session::expire_for_test(milliseconds timeout) {
  // A second client attaches to our session and closes it. Our client reconnects within a
  // millisecond or two and may take the session back before the close goes out: then try again.
  const auto deadline = steady::now() + timeout;
  const auto gen = generation();
  while (steady::now() < deadline) {
    clientid_t id{};
    {
      std::shared_lock lock(handle_mutex_);
      if (zh_ == nullptr || ctx_->gen != gen) return generation() != gen;
      if (const clientid_t* current = zoo_client_id(zh_)) id = *current;
    }
    if (id.client_id == 0) return false;
    struct waiter {
      std::mutex mutex;
      std::condition_variable cv;
      bool connected = false;
    } w;
    auto watcher = [](zhandle_t*, int type, int state, const char*, void* context) {
      if (type != ZOO_SESSION_EVENT || state != ZOO_CONNECTED_STATE) return;
      auto* w = static_cast<waiter*>(context);
      std::lock_guard lock(w->mutex);
      w->connected = true;
      w->cv.notify_all();
    };
    zhandle_t* other = zookeeper_init2(settings_.hosts.c_str(), watcher,
                                       static_cast<int>(session_timeout().count()), &id, &w,
                                       ZOO_NO_LOG_CLIENTENV, &forward_client_log);
    if (other == nullptr) return false;
    {
      std::unique_lock lock(w.mutex);
      w.cv.wait_until(lock, deadline, [&] { return w.connected; });
    }
    zookeeper_close(other);  // closes the shared session on the server, if it still has it
    std::unique_lock lock(state_mutex_);
    if (connected_cv_.wait_for(lock, milliseconds{1'500}, [&] { return gen_ != gen; })) return true;
  }
  return false;
}

}  // namespace baton::backends::zookeeper::detail
