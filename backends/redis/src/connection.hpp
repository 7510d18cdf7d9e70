#pragma once
// One Redis connection over the hiredis async API: connects, logs in, selects the database,
// runs setup commands, times commands out, and reconnects with capped exponential backoff.
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <system_error>
#include <vector>

#include "redis_config.hpp"
#include "reply.hpp"

struct redisAsyncContext;

namespace baton::backends::redis::detail {

class asio_adapter;

/// Completion of a command: an error (connection_lost, timeout, stopped, ...) or the reply,
/// which may be a Redis error reply for the caller to translate.
using reply_handler = std::function<void(std::error_code, reply)>;

/// Completion of options::resolve: an error with a reason, or the endpoint to connect to.
using resolve_handler = std::function<void(std::error_code, endpoint, std::string why)>;

/// A reconnecting connection. Everything, including every hiredis call and every callback,
/// runs on the strand given at construction; call its members only there. A command issued
/// while the connection is down fails at once (connection_lost, or auth_failed after a refused
/// login); one issued while connecting waits for the connection, at most connect_timeout.
///
/// Flow control: at most `max_in_flight` commands are on the wire; more wait in a local
/// backlog, in order, with no deadline (time queued behind our own commands says nothing about
/// the server). Redis answers a connection's commands in order, so only the oldest command on
/// the wire has a deadline: its timeout counted from when it was sent or from the last reply,
/// whichever is later. The connection is declared lost only when the server stops answering.
class connection : public std::enable_shared_from_this<connection> {
 public:
  using strand_type = boost::asio::strand<boost::asio::io_context::executor_type>;

  struct options {
    endpoint server;
    std::string role;  ///< "command" or "subscriber", for logs
    std::chrono::milliseconds connect_timeout{2'000};
    std::chrono::milliseconds command_timeout{2'000};
    std::chrono::milliseconds min_backoff{50};
    std::chrono::milliseconds max_backoff{2'000};
    std::chrono::milliseconds auth_backoff{30'000};  ///< cap after a refused login
    /// Sentinel mode: asked before every connect for the host and port to connect to (the
    /// master); the login stays `server`'s. An error fails that connect (retried with backoff).
    /// Its completion must run later on the strand, never inside the call.
    std::function<void(resolve_handler)> resolve;
    /// Deadline of resolve() (the connect that follows has connect_timeout of its own).
    std::chrono::milliseconds resolve_timeout{2'000};
    /// After login, ROLE must say "master" (else the connect fails and is retried), and a
    /// READONLY reply (the master became a replica) drops the connection.
    bool require_master = false;
    /// Connection trouble is logged at debug level only (short-lived sentinel queries).
    bool quiet = false;
    /// Commands on the wire at once; more wait in the backlog (flow control).
    std::size_t max_in_flight = 64;
  };

  connection(strand_type strand, options opts);
  ~connection() noexcept;
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  /// Commands sent after login on every connect (e.g. SCRIPT LOAD); their replies, errors
  /// included, go to `on_setup` and do not fail the connection.
  void set_setup(std::vector<std::vector<std::string>> commands,
                 std::function<void(const std::vector<reply>&)> on_setup);
  /// Called each time the connection becomes ready (after login and setup).
  void set_on_ready(std::function<void()> handler) { on_ready_ = std::move(handler); }
  /// Called each time a ready connection is lost.
  void set_on_down(std::function<void()> handler) { on_down_ = std::move(handler); }
  /// Called with every pub/sub push (subscribe confirmations and messages).
  void set_on_push(std::function<void(const reply&)> handler) { on_push_ = std::move(handler); }

  /// Starts connecting.
  void start();
  /// Closes the connection for good; pending commands fail with errc::stopped.
  void stop() noexcept;
  /// Sends a command (binary-safe arguments). The handler runs on the strand, exactly once.
  /// `allowance` is added to command_timeout for this command (a script that does much work).
  void exec(std::vector<std::string> args, reply_handler handler,
            std::chrono::milliseconds allowance = {});
  /// SUBSCRIBE / UNSUBSCRIBE one channel (subscriber role). False when not ready.
  bool subscribe(const std::string& channel);
  bool unsubscribe(const std::string& channel);

  /// Sentinel mode: the master moved to `address` ("host:port"). A connection to another
  /// address is dropped (pending commands fail with connection_lost) and a waiting reconnect
  /// starts at once; each resolves the master again.
  void reconnect_now(const std::string& address, const std::string& why);

  bool ready() const noexcept { return state_ == state::ready; }
  const options& settings() const noexcept { return options_; }
  /// The server of the current (or last) connection: host:port resolved in sentinel mode.
  const endpoint& server() const noexcept { return current_; }

 private:
  enum class state { idle, connecting, ready, closing, backoff, stopped };
  struct pending {
    reply_handler handler;
    std::chrono::milliseconds timeout;           // counted from `sent` or the last reply
    std::string command;                         // first argument, for logs
    std::chrono::steady_clock::time_point sent;  // for the latency metric and the deadline
  };
  struct waiting {
    std::vector<std::string> args;
    reply_handler handler;
    std::chrono::milliseconds timeout{};
  };

  static void on_connect(const redisAsyncContext* ac, int status);
  static void on_disconnect(const redisAsyncContext* ac, int status);
  static void on_reply(redisAsyncContext* ac, void* reply, void* privdata);
  static void on_push(redisAsyncContext* ac, void* reply, void* privdata);

  void connect();
  void open();
  void handshake();
  void handshake_failed(std::error_code ec, const std::string& why);
  void became_ready();
  /// Sends a command that fails with errc::timeout unless answered within `timeout` (see the
  /// class comment), or puts it in the backlog when max_in_flight are on the wire.
  void send(std::vector<std::string> args, reply_handler handler,
            std::chrono::milliseconds timeout);
  /// Puts a command on the wire (send() checked there is room).
  void transmit(std::vector<std::string> args, reply_handler handler,
                std::chrono::milliseconds timeout);
  /// Sends from the backlog, oldest first, while there is room on the wire.
  void send_backlog();
  /// When the oldest command on the wire times out.
  std::chrono::steady_clock::time_point head_deadline() const;
  bool send_raw(const std::vector<std::string>& args,
                void (*callback)(redisAsyncContext*, void*, void*), void* privdata);
  void reply_arrived(std::uint64_t id, const void* r);
  void arm_timeouts();
  void check_timeouts();
  /// We close the connection (timeout, failed login): frees the context, then lost().
  void drop(std::error_code ec, const std::string& why);
  /// The connection is gone: fail what is pending, schedule a reconnect.
  void lost(std::error_code ec, const std::string& why);
  void fail_all(std::error_code ec);
  void detach() noexcept;

  strand_type strand_;
  options options_;
  endpoint current_;  // options_.server, with host and port from resolve() in sentinel mode
  state state_ = state::idle;
  redisAsyncContext* ctx_ = nullptr;
  std::shared_ptr<asio_adapter> adapter_;
  std::uint64_t next_id_ = 1;
  std::map<std::uint64_t, pending> pending_;  // on the wire, oldest first
  std::deque<waiting> waiting_;               // issued while connecting
  std::deque<waiting> backlog_;               // ready, but max_in_flight are on the wire
  std::chrono::steady_clock::time_point last_reply_{};
  std::vector<std::vector<std::string>> setup_;
  std::function<void(const std::vector<reply>&)> on_setup_;
  std::function<void()> on_ready_;
  std::function<void()> on_down_;
  std::function<void(const reply&)> on_push_;
  boost::asio::steady_timer connect_timer_;
  boost::asio::steady_timer timeout_timer_;
  std::chrono::steady_clock::time_point armed_deadline_{};
  boost::asio::steady_timer backoff_timer_;
  std::uint64_t epoch_ = 0;     // counts connects; stale timers and handlers compare it
  unsigned failures_ = 0;       // consecutive failed connects
  std::error_code last_error_;  // why the connection is down
  std::minstd_rand random_{std::random_device{}()};
  // send_raw()'s argument pointers and lengths (kept for their capacity: a batch has thousands).
  std::vector<const char*> argv_;
  std::vector<std::size_t> lengths_;
};

}  // namespace baton::backends::redis::detail
