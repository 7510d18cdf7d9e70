#pragma once
/// The threads baton runs on: one io_context on a small pool, and a bounded blocking pool.
#include <memory>
#include <thread>
#include <vector>

#include <boost/asio/io_context.hpp>
#include <boost/asio/thread_pool.hpp>

namespace baton {

/// Owns the io_context that drives every timer and strand, the threads that run it, and a
/// bounded pool for blocking backend calls (SQL). Threads are fixed at construction: none is
/// started per mutex.
class runtime {
 public:
  struct options {
    unsigned io_threads = 2;        ///< threads running the io_context
    unsigned blocking_threads = 4;  ///< threads for blocking backend calls
  };

  runtime();
  explicit runtime(options opts);
  runtime(const runtime&) = delete;
  runtime& operator=(const runtime&) = delete;
  /// Stops and joins every thread.
  ~runtime();

  boost::asio::io_context& io() noexcept { return io_; }
  boost::asio::thread_pool& blocking() noexcept { return blocking_; }
  /// True on one of this runtime's io threads (blocking waits there would deadlock).
  bool on_io_thread() const noexcept;
  /// Stops the io_context and joins the threads; idempotent.
  void stop() noexcept;

 private:
  boost::asio::io_context io_;
  boost::asio::thread_pool blocking_;
  std::unique_ptr<void, void (*)(void*)> work_;
  std::vector<std::thread> threads_;
};

}  // namespace baton
