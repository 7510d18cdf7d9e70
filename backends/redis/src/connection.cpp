#include "connection.hpp"

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <unistd.h>

#include <algorithm>

#include "asio_adapter.hpp"
#include "baton/mutex/backend_descriptor.hpp"
#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/errc.hpp"
#include "baton/mutex/metrics.hpp"
#include "baton/mutex/stats.hpp"

namespace baton::backends::redis::detail {
namespace {

using steady = std::chrono::steady_clock;

connection* owner_of(const redisAsyncContext* ac) { return static_cast<connection*>(ac->data); }

std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

bool is_config_error(std::error_code ec) {
  return ec == errc::auth_failed || ec == errc::invalid_argument;
}

// A command sent at `sent` was answered, failed or timed out at `now`.
void record_latency(steady::time_point sent, steady::time_point now) noexcept {
  baton::detail::record_backend_request("redis", now - sent);
}

}  // namespace

connection::connection(strand_type strand, options opts)
    : strand_(strand),
      options_(std::move(opts)),
      current_(options_.server),
      connect_timer_(strand_),
      timeout_timer_(strand_),
      backoff_timer_(strand_) {}

connection::~connection() noexcept {
  // Normally stop() ran first. Otherwise the process is tearing down: drop the handlers
  // without calling them, then free the context.
  pending_.clear();
  waiting_.clear();
  backlog_.clear();
  detach();
}

void connection::set_setup(std::vector<std::vector<std::string>> commands,
                           std::function<void(const std::vector<reply>&)> on_setup) {
  setup_ = std::move(commands);
  on_setup_ = std::move(on_setup);
}

void connection::start() {
  if (state_ != state::idle) return;
  connect();
}

void connection::stop() noexcept {
  if (state_ == state::stopped) return;
  state_ = state::stopped;
  for (auto* timer : {&connect_timer_, &timeout_timer_, &backoff_timer_}) {
    try {
      timer->cancel();
    } catch (const std::exception&) {
      // cancel() fails only when the reactor does; nothing to undo
    }
  }
  detach();
  try {
    fail_all(make_error_code(errc::stopped));
  } catch (const std::exception& e) {
    baton::detail::log().error("redis {} ({}): stop: {}", current_.display, options_.role,
                               e.what());
  }
}

void connection::detach() noexcept {
  adapter_.reset();
  if (ctx_ == nullptr) return;
  auto* ac = ctx_;
  ctx_ = nullptr;
  ac->data = nullptr;  // the dying context's callbacks find no owner
  redisAsyncFree(ac);  // deferred by hiredis when called from one of its callbacks
}

void connection::connect() {
  if (state_ == state::stopped) return;
  ++epoch_;
  state_ = state::connecting;
  if (!options_.resolve) {
    open();
    return;
  }
  // Sentinel mode: where the master is now, asked again on every connect (it may have moved).
  connect_timer_.expires_after(options_.resolve_timeout);
  connect_timer_.async_wait(
      [self = shared_from_this(), epoch = epoch_](boost::system::error_code ec) {
        if (ec || self->epoch_ != epoch || self->state_ != state::connecting || self->ctx_) return;
        self->lost(
            make_error_code(errc::connection_lost),
            "the sentinels did not name the master within " + ms(self->options_.resolve_timeout));
      });
  options_.resolve(
      [weak = weak_from_this(), epoch = epoch_](std::error_code ec, endpoint ep, std::string why) {
        auto self = weak.lock();
        if (!self || self->epoch_ != epoch || self->state_ != state::connecting) return;
        if (ec) {
          self->lost(ec, why);
          return;
        }
        auto& current = self->current_;
        current.host = std::move(ep.host);
        current.port = ep.port;
        current.display = self->options_.server.display + " at " + ep.display;
        self->open();
      });
}

void connection::open() {
  auto* ac = redisAsyncConnect(current_.host.c_str(), current_.port);
  if (ac == nullptr) {
    lost(make_error_code(errc::connection_lost), "cannot allocate a hiredis context");
    return;
  }
  if (ac->err != 0) {
    std::string why = ac->errstr;
    auto ec = translate({ac->err, why});
    redisAsyncFree(ac);
    lost(ec, why);
    return;
  }
  ctx_ = ac;
  ac->data = this;
  // The adapter must be attached before the connect callback, which asks for a write event.
  adapter_ = asio_adapter::attach(ac, strand_, weak_from_this());
  redisAsyncSetConnectCallback(ac, &connection::on_connect);
  redisAsyncSetDisconnectCallback(ac, &connection::on_disconnect);

  connect_timer_.expires_after(options_.connect_timeout);
  connect_timer_.async_wait(
      [self = shared_from_this(), epoch = epoch_](boost::system::error_code ec) {
        if (ec || self->epoch_ != epoch || self->state_ != state::connecting) return;
        self->drop(make_error_code(errc::connection_lost),
                   "not connected and logged in within connect_timeout (" +
                       ms(self->options_.connect_timeout) + ")");
      });
  handshake();
}

void connection::handshake() {
  // Login (fatal when refused), then our name and the setup commands (not fatal). The
  // connection is ready when the last reply is in, which also proves the connect worked.
  struct step {
    std::vector<std::string> args;
    bool fatal;
    int setup_index;
  };
  std::vector<step> steps;
  const auto& server = current_;
  if (!server.password.empty()) {
    if (server.user.empty())
      steps.push_back({{"AUTH", server.password}, true, -1});
    else
      steps.push_back({{"AUTH", server.user, server.password}, true, -1});
  }
  if (server.db != 0) steps.push_back({{"SELECT", std::to_string(server.db)}, true, -1});
  // Sentinel mode: the address a sentinel named must be a master now (it may be a demoted one).
  if (options_.require_master) steps.push_back({{"ROLE"}, true, -2});
  steps.push_back(
      {{"CLIENT", "SETNAME", "baton-" + options_.role + "-" + std::to_string(::getpid())},
       false,
       -1});
  for (std::size_t i = 0; i < setup_.size(); ++i)
    steps.push_back({setup_[i], false, static_cast<int>(i)});

  auto left = std::make_shared<std::size_t>(steps.size());
  auto setup_replies = std::make_shared<std::vector<reply>>(setup_.size());
  const auto epoch = epoch_;
  for (auto& s : steps) {
    std::string what = s.args.front() == "AUTH" ? "AUTH"
                       : s.args.size() == 1     ? s.args.front()
                                                : s.args.front() + " " + s.args[1];
    // `this` is safe: the handler lives in pending_ and runs only while we exist.
    auto handler = [this, epoch, fatal = s.fatal, index = s.setup_index, what, left, setup_replies](
                       std::error_code ec, reply r) {
      if (ec || epoch_ != epoch || state_ != state::connecting) return;
      if (r.is_error()) {
        // NOAUTH on any step: the server wants a password the url does not give.
        if (fatal || r.is_error("NOAUTH")) {
          handshake_failed(translate({0, r.str}), what + " refused: " + r.str);
          return;
        }
        if (index < 0)
          baton::detail::log().debug("redis {} ({}): {} refused: {}", current_.display,
                                     options_.role, what, r.str);
      }
      if (index == -2) {
        const bool master = r.type == reply::kind::array && !r.elements.empty() &&
                            r.elements[0].type == reply::kind::string &&
                            r.elements[0].str == "master";
        if (!master) {
          const auto role = r.type == reply::kind::array && !r.elements.empty() ? r.elements[0].str
                                                                                : r.describe();
          handshake_failed(make_error_code(errc::connection_lost),
                           "ROLE is '" + role + "', not master (a failover is under way?)");
          return;
        }
      }
      if (index >= 0) (*setup_replies)[index] = std::move(r);
      if (--*left == 0) {
        if (on_setup_) on_setup_(*setup_replies);
        became_ready();
      }
    };
    send(std::move(s.args), std::move(handler), options_.connect_timeout);
  }
}

void connection::handshake_failed(std::error_code ec, const std::string& why) { drop(ec, why); }

void connection::became_ready() {
  state_ = state::ready;
  connect_timer_.cancel();
  if (failures_ > 0)
    baton::detail::log().info("redis {} ({}): connected after {} failed attempt(s)",
                              current_.display, options_.role, failures_);
  failures_ = 0;
  last_error_ = {};
  auto queued = std::move(waiting_);
  waiting_.clear();
  for (auto& w : queued) {
    if (state_ != state::ready) {
      w.handler(last_error_ ? last_error_ : make_error_code(errc::connection_lost), {});
      continue;
    }
    send(std::move(w.args), std::move(w.handler), options_.command_timeout + w.timeout);
  }
  if (state_ == state::ready && on_ready_) on_ready_();
}

void connection::exec(std::vector<std::string> args, reply_handler handler,
                      std::chrono::milliseconds allowance) {
  switch (state_) {
    case state::ready:
      send(std::move(args), std::move(handler), options_.command_timeout + allowance);
      return;
    case state::idle:
    case state::connecting:
      waiting_.push_back({std::move(args), std::move(handler), allowance});
      return;
    case state::stopped:
      handler(make_error_code(errc::stopped), {});
      return;
    case state::closing:
    case state::backoff:
      handler(last_error_ ? last_error_ : make_error_code(errc::connection_lost), {});
      return;
  }
}

bool connection::subscribe(const std::string& channel) {
  return state_ == state::ready && send_raw({"SUBSCRIBE", channel}, &connection::on_push, nullptr);
}

bool connection::unsubscribe(const std::string& channel) {
  return state_ == state::ready &&
         send_raw({"UNSUBSCRIBE", channel}, &connection::on_push, nullptr);
}

bool connection::send_raw(const std::vector<std::string>& args,
                          void (*callback)(redisAsyncContext*, void*, void*), void* privdata) {
  if (ctx_ == nullptr || args.empty()) return false;
  argv_.clear();
  lengths_.clear();
  for (const auto& a : args) {
    argv_.push_back(a.data());
    lengths_.push_back(a.size());
  }
  baton::detail::count_backend_requests();
  const bool sent = redisAsyncCommandArgv(ctx_, callback, privdata, static_cast<int>(argv_.size()),
                                          argv_.data(), lengths_.data()) == REDIS_OK;
  argv_.clear();  // pointers into `args`, which goes away
  return sent;
}

void connection::send(std::vector<std::string> args, reply_handler handler,
                      std::chrono::milliseconds timeout) {
  if (!backlog_.empty() || pending_.size() >= std::max<std::size_t>(options_.max_in_flight, 1)) {
    // Flow control: it goes on the wire once earlier commands are answered; until then no
    // deadline runs for it.
    backlog_.push_back({std::move(args), std::move(handler), timeout});
    return;
  }
  transmit(std::move(args), std::move(handler), timeout);
}

void connection::transmit(std::vector<std::string> args, reply_handler handler,
                          std::chrono::milliseconds timeout) {
  const auto id = next_id_++;
  const auto sent = steady::now();
  if (!send_raw(args, &connection::on_reply,
                reinterpret_cast<void*>(static_cast<std::uintptr_t>(id)))) {
    // The context refused the command (it is disconnecting): the connection is going away.
    handler(make_error_code(errc::connection_lost), {});
    return;
  }
  if (pending_.empty()) last_reply_ = sent;  // the server owes nothing older
  pending_.emplace(id, pending{std::move(handler), timeout, args.front(), sent});
  arm_timeouts();
}

void connection::send_backlog() {
  while (!backlog_.empty() && state_ == state::ready && ctx_ != nullptr &&
         pending_.size() < std::max<std::size_t>(options_.max_in_flight, 1)) {
    auto w = std::move(backlog_.front());
    backlog_.pop_front();
    transmit(std::move(w.args), std::move(w.handler), w.timeout);
  }
}

steady::time_point connection::head_deadline() const {
  const auto& head = pending_.begin()->second;
  return std::max(head.sent, last_reply_) + head.timeout;
}

void connection::on_connect(const redisAsyncContext* ac, int status) {
  auto* self = owner_of(ac);
  if (self == nullptr) return;
  auto* mutable_ac = const_cast<redisAsyncContext*>(ac);
  if (status == REDIS_OK) {
    redisEnableKeepAlive(&mutable_ac->c);
    return;
  }
  // hiredis frees the context right after this callback.
  std::string why = ac->errstr != nullptr && *ac->errstr ? ac->errstr : "connect failed";
  auto ec = translate({ac->err != 0 ? ac->err : REDIS_ERR_IO, why});
  mutable_ac->data = nullptr;
  self->ctx_ = nullptr;
  self->lost(ec, why);
}

void connection::on_disconnect(const redisAsyncContext* ac, int status) {
  auto* self = owner_of(ac);
  if (self == nullptr) return;  // we freed it ourselves
  std::string why = ac->errstr != nullptr && *ac->errstr ? ac->errstr : "connection closed";
  auto ec = translate({ac->err != 0 ? ac->err : REDIS_ERR_EOF, why});
  const_cast<redisAsyncContext*>(ac)->data = nullptr;
  self->ctx_ = nullptr;
  self->lost(ec, why);
}

void connection::on_reply(redisAsyncContext* ac, void* r, void* privdata) {
  auto* self = owner_of(ac);
  if (self == nullptr) return;
  self->reply_arrived(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(privdata)), r);
}

void connection::on_push(redisAsyncContext* ac, void* r, void* privdata) {
  auto* self = owner_of(ac);
  if (self == nullptr || r == nullptr || !self->on_push_) return;
  self->on_push_(reply::from(*static_cast<const redisReply*>(r)));
}

void connection::reply_arrived(std::uint64_t id, const void* r) {
  // A null reply: hiredis is failing the pending commands of a dying context.
  if (r == nullptr && state_ == state::ready) state_ = state::closing;
  auto it = pending_.find(id);
  if (it == pending_.end()) return;  // timed out already
  const auto now = steady::now();
  record_latency(it->second.sent, now);
  auto handler = std::move(it->second.handler);
  pending_.erase(it);
  if (r != nullptr) {
    // The server answers: the next command's deadline counts from here.
    last_reply_ = now;
    send_backlog();
  }
  if (r == nullptr) {
    handler(make_error_code(errc::connection_lost), {});
    return;
  }
  auto answer = reply::from(*static_cast<const redisReply*>(r));
  // Sentinel mode: the master we talk to became a replica; find the new one.
  if (options_.require_master && state_ == state::ready && answer.is_error("READONLY"))
    drop(make_error_code(errc::connection_lost),
         "the server is a replica now (READONLY); asking the sentinels for the master");
  handler({}, std::move(answer));
}

void connection::reconnect_now(const std::string& address, const std::string& why) {
  const bool same = current_.host + ":" + std::to_string(current_.port) == address;
  switch (state_) {
    case state::ready:
    case state::closing:
    case state::connecting:
      // Connected (or connecting) to the new master already: nothing to do.
      if (same && ctx_ != nullptr) return;
      drop(make_error_code(errc::connection_lost), why);
      break;
    case state::backoff:
      break;
    case state::idle:
    case state::stopped:
      return;
  }
  if (state_ != state::backoff) return;  // a handler stopped us
  // Resolve again now rather than after the backoff.
  backoff_timer_.cancel();
  failures_ = 0;
  connect();
}

void connection::arm_timeouts() {
  if (pending_.empty()) return;
  // Only the oldest command can be late: the server answers in order. A timer armed for an
  // earlier time re-checks then (a reply since only moves the deadline later).
  const auto earliest = head_deadline();
  if (armed_deadline_ != steady::time_point{} && armed_deadline_ <= earliest) return;
  armed_deadline_ = earliest;
  timeout_timer_.expires_at(earliest);
  timeout_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (ec) return;  // re-armed or stopped
    self->armed_deadline_ = {};
    self->check_timeouts();
  });
}

void connection::check_timeouts() {
  if (state_ == state::stopped) return;
  const auto now = steady::now();
  if (pending_.empty()) return;
  if (head_deadline() > now) {
    arm_timeouts();
    return;
  }
  auto expired = std::move(pending_.begin()->second);
  pending_.erase(pending_.begin());
  record_latency(expired.sent, now);
  // hiredis has no timeouts of its own: a reply that does not come means a dead or stuck
  // connection, and later replies could not be matched any more. Close it and reconnect.
  drop(make_error_code(errc::connection_lost),
       state_ == state::connecting
           ? "not connected and logged in within connect_timeout (" + ms(options_.connect_timeout) +
                 ")"
           : "no reply to " + expired.command + " within " + ms(expired.timeout) +
                 " (command_timeout " + ms(options_.command_timeout) + " plus its allowance)" +
                 " while " + std::to_string(pending_.size() + 1) + " command(s) were on the wire");
  expired.handler(make_error_code(errc::timeout), {});
}

void connection::drop(std::error_code ec, const std::string& why) {
  detach();
  lost(ec, why);
}

void connection::lost(std::error_code ec, const std::string& native_why) {
  // hiredis and server messages do not echo the password; scrubbed all the same.
  const std::string why = scrub(native_why, current_.secrets);
  adapter_.reset();
  ctx_ = nullptr;
  connect_timer_.cancel();
  if (state_ == state::stopped) return;
  const bool was_up = state_ == state::ready || state_ == state::closing;
  const auto command_error = is_config_error(ec) ? ec : make_error_code(errc::connection_lost);
  state_ = state::backoff;
  last_error_ = command_error;
  ++failures_;

  const auto cap = is_config_error(ec) ? options_.auth_backoff : options_.max_backoff;
  auto delay = options_.min_backoff;
  for (unsigned i = 1; i < failures_ && delay < cap; ++i) delay *= 2;
  delay = std::min(delay, cap);
  // +-25% jitter, so that many clients do not reconnect in lockstep after a server restart.
  std::uniform_int_distribution<long long> jitter(delay.count() * 3 / 4, delay.count() * 5 / 4);
  delay = std::chrono::milliseconds{jitter(random_)};

  auto& log = baton::detail::log();
  const auto& who = current_.display;
  if (options_.quiet)
    log.debug("redis {} ({}): {}", who, options_.role, why);
  else if (is_config_error(ec))
    log.error(
        "redis {} ({}): {} ({}); check the credentials and database in the url; "
        "retrying in {}",
        who, options_.role, why, ec.message(), ms(delay));
  else if (was_up)
    log.warn("redis {} ({}): connection lost: {}; reconnecting", who, options_.role, why);
  else if (failures_ == 1 || failures_ % 10 == 0)
    log.warn("redis {} ({}): cannot connect: {} (attempt {}); retrying in {}", who, options_.role,
             why, failures_, ms(delay));

  fail_all(command_error);
  if (was_up && on_down_) on_down_();
  if (state_ != state::backoff) return;  // a handler stopped us
  backoff_timer_.expires_after(delay);
  backoff_timer_.async_wait(
      [self = shared_from_this(), epoch = epoch_](boost::system::error_code e) {
        if (e || self->epoch_ != epoch || self->state_ != state::backoff) return;
        self->connect();
      });
}

void connection::fail_all(std::error_code ec) {
  auto pending = std::move(pending_);
  pending_.clear();
  auto queued = std::move(waiting_);
  waiting_.clear();
  for (auto& w : backlog_) queued.push_back(std::move(w));
  backlog_.clear();
  if (!pending.empty()) {
    const auto now = steady::now();
    for (auto& [id, p] : pending) record_latency(p.sent, now);
  }
  for (auto& [id, p] : pending) p.handler(ec, {});
  for (auto& w : queued) w.handler(ec, {});
}

}  // namespace baton::backends::redis::detail
