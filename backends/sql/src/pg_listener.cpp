#include "pg_listener.hpp"

#include <algorithm>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <vector>

#include "baton/mutex/backend_descriptor.hpp"
#include "baton/mutex/detail/log.hpp"

namespace baton::backends::sql::detail {
namespace {

constexpr std::chrono::milliseconds first_backoff{200};
constexpr std::chrono::milliseconds max_backoff{5000};

void log_notice(void*, const char* message) {
  std::string text(message);
  while (!text.empty() && text.back() == '\n') text.pop_back();
  baton::detail::log().debug("postgresql: {}", text);
}

}  // namespace

void quiet_notices(PGconn* conn) noexcept {
  if (conn != nullptr) PQsetNoticeProcessor(conn, &log_notice, nullptr);
}

pg_listener::pg_listener(runtime& rt, std::string connect_string, std::string channel,
                         std::vector<std::string> secrets)
    : runtime_(rt),
      connect_string_(std::move(connect_string)),
      channel_(std::move(channel)),
      secrets_(std::move(secrets)),
      strand_(boost::asio::make_strand(rt.io())),
      descriptor_(strand_),
      retry_timer_(strand_) {}

pg_listener::~pg_listener() noexcept { close(); }

std::uint64_t pg_listener::watch(const std::string& name, std::function<void()> wake) {
  std::lock_guard lock(mutex_);
  const auto id = next_id_++;
  watchers_[id] = {name, std::move(wake)};
  if (!started_) {
    started_ = true;
    boost::asio::post(strand_, [self = shared_from_this()] { self->connect(); });
  }
  return id;
}

void pg_listener::unwatch(std::uint64_t id) noexcept {
  std::lock_guard lock(mutex_);
  watchers_.erase(id);
}

void pg_listener::stop() noexcept {
  try {
    boost::asio::post(strand_, [self = shared_from_this()] {
      self->stopped_ = true;
      self->retry_timer_.cancel();
      self->close();
    });
  } catch (...) {
  }
}

void pg_listener::connect() {
  if (stopped_) return;
  // Connecting blocks (up to connect_timeout): on the blocking pool, never on an io thread.
  boost::asio::post(runtime_.blocking(), [self = shared_from_this()] {
    std::string error;
    PGconn* conn = PQconnectdb(self->connect_string_.c_str());
    quiet_notices(conn);
    if (PQstatus(conn) != CONNECTION_OK) {
      error = PQerrorMessage(conn);
    } else {
      // The channel is "baton:" + a validated table name: no quote can occur in it.
      PGresult* result = PQexec(conn, ("LISTEN \"" + self->channel_ + "\"").c_str());
      if (PQresultStatus(result) != PGRES_COMMAND_OK) error = PQerrorMessage(conn);
      PQclear(result);
      if (error.empty() && PQsetnonblocking(conn, 1) != 0) error = PQerrorMessage(conn);
    }
    if (!error.empty()) {
      PQfinish(conn);
      conn = nullptr;
      error = scrub(std::move(error), self->secrets_);
    }
    boost::asio::post(self->strand_, [self, conn, error] { self->on_connected(conn, error); });
  });
}

void pg_listener::on_connected(PGconn* conn, const std::string& error) {
  if (stopped_) {
    if (conn != nullptr) PQfinish(conn);
    return;
  }
  if (conn == nullptr) {
    if (failures_ == 0)
      baton::detail::log().warn("postgresql: LISTEN connection failed (waiters poll meanwhile): {}",
                                error);
    retry_later();
    return;
  }
  conn_ = conn;
  failures_ = 0;
  boost::system::error_code ec;
  descriptor_.assign(PQsocket(conn_), ec);
  if (ec) {
    baton::detail::log().warn("postgresql: LISTEN connection: {}", ec.message());
    close();
    retry_later();
    return;
  }
  wake(nullptr);  // a release may have gone by while not listening
  wait();
}

void pg_listener::wait() {
  descriptor_.async_wait(
      boost::asio::posix::stream_descriptor::wait_read,
      boost::asio::bind_executor(strand_,
                                 [self = shared_from_this()](const boost::system::error_code& ec) {
                                   self->on_readable(ec);
                                 }));
}

void pg_listener::on_readable(const boost::system::error_code& ec) {
  if (stopped_ || conn_ == nullptr || ec == boost::asio::error::operation_aborted) return;
  if (ec || PQconsumeInput(conn_) == 0) {
    baton::detail::log().warn("postgresql: LISTEN connection lost (waiters poll meanwhile): {}",
                              ec ? ec.message() : scrub(PQerrorMessage(conn_), secrets_));
    close();
    retry_later();
    return;
  }
  std::vector<std::string> names;
  while (PGnotify* n = PQnotifies(conn_)) {
    names.emplace_back(n->extra);
    PQfreemem(n);
  }
  for (const auto& name : names) wake(&name);
  wait();
}

void pg_listener::retry_later() {
  ++failures_;
  auto delay = first_backoff;
  for (unsigned i = 1; i < failures_ && delay < max_backoff; ++i) delay *= 2;
  retry_timer_.expires_after(std::min(delay, max_backoff));
  retry_timer_.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
    if (!ec) self->connect();
  });
}

void pg_listener::close() noexcept {
  if (conn_ == nullptr) return;
  boost::system::error_code ignored;
  descriptor_.cancel(ignored);
  descriptor_.release();  // libpq owns the socket
  PQfinish(conn_);
  conn_ = nullptr;
}

void pg_listener::wake(const std::string* name) {
  std::vector<std::function<void()>> wakes;
  {
    std::lock_guard lock(mutex_);
    for (const auto& [id, w] : watchers_)
      if (name == nullptr || w.first == *name) wakes.push_back(w.second);
  }
  for (auto& w : wakes) w();
}

}  // namespace baton::backends::sql::detail
