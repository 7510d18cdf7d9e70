#pragma once
// Drives a hiredis async context from Boost.Asio: hiredis asks for read/write readiness through
// its ev hooks, and we wait with posix::stream_descriptor::async_wait on the strand.
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <memory>

struct redisAsyncContext;

namespace baton::backends::redis::detail {

/// Event-loop glue for one hiredis async context. Attach it right after redisAsyncConnect and
/// before setting the connect callback (which asks for the first write event). hiredis owns the
/// socket: on cleanup the descriptor is cancelled and released, never closed. Pending waits hold
/// the adapter alive; after cleanup they do nothing. Every call happens on the strand `ex`.
class asio_adapter : public std::enable_shared_from_this<asio_adapter> {
 public:
  /// Hooks `ac` up to the loop; `anchor` (the connection owning `ac`) is locked around every
  /// call into hiredis, so the owner cannot go away in the middle of one.
  static std::shared_ptr<asio_adapter> attach(redisAsyncContext* ac,
                                              const boost::asio::any_io_executor& ex,
                                              std::weak_ptr<void> anchor);
  asio_adapter(redisAsyncContext* ac, const boost::asio::any_io_executor& ex,
               std::weak_ptr<void> anchor);
  ~asio_adapter() noexcept;

  /// True after hiredis called cleanup (the context is being freed or was freed).
  bool closed() const noexcept { return closed_; }

 private:
  static void add_read(void* self);
  static void del_read(void* self);
  static void add_write(void* self);
  static void del_write(void* self);
  static void cleanup(void* self);

  void wait_read();
  void wait_write();
  void flush_soon();
  void close() noexcept;

  redisAsyncContext* ac_;
  boost::asio::posix::stream_descriptor descriptor_;
  std::weak_ptr<void> anchor_;
  std::shared_ptr<asio_adapter> self_;  // hiredis' reference, dropped on cleanup
  bool reading_ = false, writing_ = false;
  bool read_waiting_ = false, write_waiting_ = false;
  bool closed_ = false;
};

}  // namespace baton::backends::redis::detail
