#pragma once
// Blocking hiredis connections for callers that wait anyway (baton::locker's lock and unlock):
// a request goes out and its reply is read on the caller's thread, without a hop to an io
// thread and back. Made on first use only, so a process that never locks that way keeps its
// two connections; one per caller at a time, kept for the next caller.
#include <chrono>
#include <cstddef>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include "redis_config.hpp"
#include "reply.hpp"

namespace baton::backends::redis::detail {

class blocking_client {
 public:
  /// `scripts`: the Lua texts eval() runs by index (loaded on each new connection).
  blocking_client(const settings& config, std::vector<std::string> scripts);
  ~blocking_client();
  blocking_client(const blocking_client&) = delete;
  blocking_client& operator=(const blocking_client&) = delete;

  /// EVALSHA of script `index` (EVAL when the server lost it) with `keys` and `args`, on the
  /// calling thread. False when no connection could be had (nothing was sent; after a failed
  /// connect, no new one is tried for a second). True otherwise, with `ec` (connection_lost,
  /// timeout: the request may have run) or the reply, which may be an error reply.
  bool eval(std::size_t index, const std::vector<std::string>& keys,
            const std::vector<std::string>& args, std::error_code& ec, reply& out);

 private:
  struct connection;
  std::unique_ptr<connection> take();
  void put(std::unique_ptr<connection> c);

  settings settings_;
  std::vector<std::string> scripts_;
  std::mutex mutex_;  // guards the fields below
  std::vector<std::unique_ptr<connection>> idle_;
  std::chrono::steady_clock::time_point retry_after_{};
};

}  // namespace baton::backends::redis::detail
