#pragma once
// Redis Sentinel: finds the master by asking the sentinels (SENTINEL get-master-addr-by-name,
// in order, the first answer wins) and listens on one sentinel for +switch-master.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "connection.hpp"
#include "redis_config.hpp"

namespace baton::backends::redis::detail {

/// Where the master is, per the sentinels. Lives on the store's strand; every member runs there.
class sentinel_resolver : public std::enable_shared_from_this<sentinel_resolver> {
 public:
  sentinel_resolver(connection::strand_type strand, const settings& config);

  /// Asks the sentinels in order, each with a short-lived connection (connect_timeout, then
  /// command_timeout), and completes (later, on the strand) with the first address named: a
  /// sentinel that cannot be reached, refuses the login or does not know the master is skipped.
  /// When none names it: connection_lost with every sentinel's reason. The address a
  /// +switch-master just announced (prefer()) is tried without asking, for a few seconds.
  void resolve(resolve_handler done);

  /// A +switch-master named `host:port` as the new master.
  void prefer(const std::string& host, int port);

  /// Stops the queries in flight (their completions do not run).
  void stop() noexcept;

  /// Worst case of one resolve(): every sentinel times out.
  std::chrono::milliseconds timeout() const;

 private:
  struct query;
  void ask(std::shared_ptr<query> q, std::size_t index);

  connection::strand_type strand_;
  settings settings_;
  // Query connections in flight: one per resolve() in progress (the command and the pub/sub
  // connection may resolve at the same time; neither cancels the other's query).
  std::vector<std::shared_ptr<connection>> asking_;
  std::optional<endpoint> preferred_;
  std::chrono::steady_clock::time_point preferred_until_{};
  bool stopped_ = false;
};

/// The subscriber connection to one sentinel (the next one in the list after a failure) on the
/// channel +switch-master; calls `on_switch(host, port, sentinel)` when our master moved.
std::shared_ptr<connection> make_switch_listener(
    connection::strand_type strand, const settings& config,
    std::function<void(const std::string& host, int port, const std::string& sentinel)> on_switch);

}  // namespace baton::backends::redis::detail
