#include "blocking_client.hpp"

#include <hiredis/hiredis.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include "baton/mutex/backend_descriptor.hpp"
#include "baton/mutex/detail/log.hpp"
#include "baton/mutex/errc.hpp"
#include "baton/mutex/metrics.hpp"
#include "baton/mutex/stats.hpp"

namespace baton::backends::redis::detail {
namespace {

using steady = std::chrono::steady_clock;

// Connections kept for later callers; more (that many callers at once) are closed after use.
constexpr std::size_t max_idle = 4;
// After a failed connect, callers go the asynchronous way this long.
constexpr std::chrono::seconds connect_backoff{1};

timeval to_timeval(std::chrono::milliseconds d) {
  return {static_cast<time_t>(d.count() / 1000), static_cast<suseconds_t>(d.count() % 1000 * 1000)};
}

struct context_free {
  void operator()(redisContext* c) const noexcept { redisFree(c); }
};

}  // namespace

struct blocking_client::connection {
  std::unique_ptr<redisContext, context_free> ctx;
  std::vector<std::string> shas;  // per script; empty: EVAL
  std::vector<const char*> argv;
  std::vector<std::size_t> lengths;

  // One command and its reply. An I/O error or a timeout leaves the connection unusable.
  std::error_code command(const std::vector<std::string>& args, reply& out) {
    argv.clear();
    lengths.clear();
    for (const auto& a : args) {
      argv.push_back(a.data());
      lengths.push_back(a.size());
    }
    char* text = nullptr;
    const int length =
        redisFormatCommandArgv(&text, static_cast<int>(args.size()), argv.data(), lengths.data());
    if (length < 0) return make_error_code(errc::backend_error);
    // send(MSG_NOSIGNAL) rather than hiredis' write(): a closed connection must not raise
    // SIGPIPE in the caller's process.
    const auto sent = steady::now();
    for (int done = 0; done < length;) {
      const auto n =
          ::send(ctx->fd, text + done, static_cast<std::size_t>(length - done), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const bool late = errno == EAGAIN || errno == EWOULDBLOCK;
        redisFreeCommand(text);
        return make_error_code(late ? errc::timeout : errc::connection_lost);
      }
      done += static_cast<int>(n);
    }
    redisFreeCommand(text);
    baton::detail::count_backend_requests();
    void* raw = nullptr;
    errno = 0;
    const int status = redisGetReply(ctx.get(), &raw);
    baton::detail::record_backend_request("redis", steady::now() - sent);
    if (status != REDIS_OK || raw == nullptr) {
      const bool late = ctx->err == REDIS_ERR_IO && (errno == EAGAIN || errno == EWOULDBLOCK);
      return late ? make_error_code(errc::timeout)
                  : translate({ctx->err != 0 ? ctx->err : REDIS_ERR_IO, ctx->errstr});
    }
    out = reply::from(*static_cast<const redisReply*>(raw));
    freeReplyObject(raw);
    return {};
  }
};

blocking_client::blocking_client(const settings& config, std::vector<std::string> scripts)
    : settings_(config), scripts_(std::move(scripts)) {}

blocking_client::~blocking_client() = default;

std::unique_ptr<blocking_client::connection> blocking_client::take() {
  {
    std::lock_guard lock(mutex_);
    if (!idle_.empty()) {
      auto c = std::move(idle_.back());
      idle_.pop_back();
      return c;
    }
    if (steady::now() < retry_after_) return nullptr;
  }
  const auto& server = settings_.server;
  auto failed = [&](const std::string& why) -> std::unique_ptr<connection> {
    baton::detail::log().warn("redis {} (blocking): {}; locking the asynchronous way for now",
                              server.display, scrub(why, server.secrets));
    std::lock_guard lock(mutex_);
    retry_after_ = steady::now() + connect_backoff;
    return nullptr;
  };
  auto c = std::make_unique<connection>();
  c->ctx.reset(redisConnectWithTimeout(server.host.c_str(), server.port,
                                       to_timeval(settings_.connect_timeout)));
  if (!c->ctx || c->ctx->err != 0)
    return failed(std::string("cannot connect: ") + (c->ctx ? c->ctx->errstr : "out of memory"));
  redisSetTimeout(c->ctx.get(), to_timeval(settings_.command_timeout));
  redisEnableKeepAlive(c->ctx.get());
  std::vector<std::vector<std::string>> login;
  if (!server.password.empty()) {
    if (server.user.empty())
      login.push_back({"AUTH", server.password});
    else
      login.push_back({"AUTH", server.user, server.password});
  }
  if (server.db != 0) login.push_back({"SELECT", std::to_string(server.db)});
  login.push_back({"CLIENT", "SETNAME", "baton-blocking-" + std::to_string(::getpid())});
  for (const auto& command : login) {
    reply r;
    if (auto ec = c->command(command, r)) return failed(command.front() + ": " + ec.message());
    if (r.is_error() && command.front() != "CLIENT")
      return failed(command.front() + " refused: " + r.str);
  }
  for (const auto& text : scripts_) {
    reply r;
    if (auto ec = c->command({"SCRIPT", "LOAD", text}, r))
      return failed("SCRIPT LOAD: " + ec.message());
    c->shas.push_back(r.type == reply::kind::string ? r.str : std::string{});
  }
  return c;
}

void blocking_client::put(std::unique_ptr<connection> c) {
  std::lock_guard lock(mutex_);
  if (idle_.size() < max_idle) idle_.push_back(std::move(c));
}

bool blocking_client::eval(std::size_t index, const std::vector<std::string>& keys,
                           const std::vector<std::string>& args, std::error_code& ec, reply& out) {
  auto c = take();
  if (!c) return false;
  auto command = [&](bool by_sha) {
    std::vector<std::string> v;
    v.reserve(3 + keys.size() + args.size());
    v.push_back(by_sha ? "EVALSHA" : "EVAL");
    v.push_back(by_sha ? c->shas[index] : scripts_[index]);
    v.push_back(std::to_string(keys.size()));
    v.insert(v.end(), keys.begin(), keys.end());
    v.insert(v.end(), args.begin(), args.end());
    return v;
  };
  const bool by_sha = !c->shas[index].empty();
  ec = c->command(command(by_sha), out);
  // NOSCRIPT: the server restarted or flushed its scripts; EVAL caches it there again.
  if (!ec && by_sha && out.is_error("NOSCRIPT")) ec = c->command(command(false), out);
  if (ec) {
    baton::detail::log().warn("redis {} (blocking): {}; the connection is closed",
                              settings_.server.display, ec.message());
    return true;  // the connection goes; the next caller makes a new one
  }
  put(std::move(c));
  return true;
}

}  // namespace baton::backends::redis::detail
