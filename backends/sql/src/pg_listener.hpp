#pragma once
// PostgreSQL LISTEN/NOTIFY wake-ups: one connection per store listens on the table's channel and
// wakes the waiters of a mutex when its owner releases it (the release NOTIFYs the mutex name).
// Waiters keep polling: a notification sent while this connection is down is lost.
#include <libpq-fe.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "baton/mutex/runtime.hpp"

namespace baton::backends::sql::detail {

/// Routes the server's notices (NOTICE, the FATAL before a kill) to the log at debug level
/// instead of libpq's default, stderr.
void quiet_notices(PGconn* conn) noexcept;

class pg_listener : public std::enable_shared_from_this<pg_listener> {
 public:
  /// `secrets`: scrubbed from libpq's messages before they are logged.
  pg_listener(runtime& rt, std::string connect_string, std::string channel,
              std::vector<std::string> secrets);
  pg_listener(const pg_listener&) = delete;
  pg_listener& operator=(const pg_listener&) = delete;
  ~pg_listener() noexcept;

  /// Calls `wake` (on an io thread) when `name` is released, and once after every (re)connect.
  /// Starts listening on first use; never blocks.
  std::uint64_t watch(const std::string& name, std::function<void()> wake);
  void unwatch(std::uint64_t id) noexcept;
  /// Closes the connection; no more wake-ups.
  void stop() noexcept;

 private:
  using executor = boost::asio::strand<boost::asio::io_context::executor_type>;

  void connect();  // on the strand: connects on the blocking pool
  void on_connected(PGconn* conn, const std::string& error);
  void wait();
  void on_readable(const boost::system::error_code& ec);
  void retry_later();
  void close() noexcept;
  void wake(const std::string* name);

  runtime& runtime_;
  std::string connect_string_;
  std::string channel_;
  std::vector<std::string> secrets_;
  executor strand_;
  boost::asio::posix::stream_descriptor descriptor_;
  boost::asio::steady_timer retry_timer_;
  PGconn* conn_ = nullptr;  // strand only
  bool stopped_ = false;    // strand only
  unsigned failures_ = 0;   // strand only

  std::mutex mutex_;  // guards the fields below
  bool started_ = false;
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, std::pair<std::string, std::function<void()>>> watchers_;
};

}  // namespace baton::backends::sql::detail
