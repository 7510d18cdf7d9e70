#include "asio_adapter.hpp"

#include <boost/asio/defer.hpp>

#include <hiredis/async.h>
#include <hiredis/hiredis.h>
#include <pthread.h>
#include <signal.h>

#include <ctime>

namespace baton::backends::redis::detail {
namespace {

// hiredis writes with write(2): a connection the server closed would raise SIGPIPE and kill the
// process. Block it on this thread around the write and swallow one raised by it, without
// changing the process-wide disposition.
class sigpipe_guard {
 public:
  sigpipe_guard() noexcept {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
    sigset_t pending;
    sigpending(&pending);
    was_pending_ = sigismember(&pending, SIGPIPE) == 1;
  }
  ~sigpipe_guard() noexcept {
    if (!was_pending_) {
      sigset_t pending;
      sigpending(&pending);
      if (sigismember(&pending, SIGPIPE) == 1) {
        timespec zero{0, 0};
        sigtimedwait(&pipe_, nullptr, &zero);
      }
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  sigpipe_guard(const sigpipe_guard&) = delete;
  sigpipe_guard& operator=(const sigpipe_guard&) = delete;

 private:
  sigset_t pipe_{};
  sigset_t old_{};
  bool was_pending_ = false;
};

asio_adapter* from(void* p) { return static_cast<asio_adapter*>(p); }

}  // namespace

std::shared_ptr<asio_adapter> asio_adapter::attach(redisAsyncContext* ac,
                                                   const boost::asio::any_io_executor& ex,
                                                   std::weak_ptr<void> anchor) {
  auto adapter = std::make_shared<asio_adapter>(ac, ex, std::move(anchor));
  adapter->self_ = adapter;
  ac->ev.data = adapter.get();
  ac->ev.addRead = &asio_adapter::add_read;
  ac->ev.delRead = &asio_adapter::del_read;
  ac->ev.addWrite = &asio_adapter::add_write;
  ac->ev.delWrite = &asio_adapter::del_write;
  ac->ev.cleanup = &asio_adapter::cleanup;
  return adapter;
}

asio_adapter::asio_adapter(redisAsyncContext* ac, const boost::asio::any_io_executor& ex,
                           std::weak_ptr<void> anchor)
    : ac_(ac), descriptor_(ex, ac->c.fd), anchor_(std::move(anchor)) {}

asio_adapter::~asio_adapter() noexcept { close(); }

void asio_adapter::close() noexcept {
  closed_ = true;
  reading_ = writing_ = false;
  if (descriptor_.is_open()) {
    boost::system::error_code ignored;
    descriptor_.cancel(ignored);
    descriptor_.release();  // hiredis closes the socket itself
  }
}

void asio_adapter::add_read(void* p) {
  auto* self = from(p);
  if (self == nullptr) return;
  self->reading_ = true;
  self->wait_read();
}

void asio_adapter::del_read(void* p) {
  if (auto* self = from(p)) self->reading_ = false;
}

void asio_adapter::add_write(void* p) {
  auto* self = from(p);
  if (self == nullptr) return;
  self->writing_ = true;
  self->flush_soon();
}

void asio_adapter::del_write(void* p) {
  if (auto* self = from(p)) self->writing_ = false;
}

void asio_adapter::cleanup(void* p) {
  auto* self = from(p);
  if (self == nullptr) return;
  // hiredis 0.14 may call cleanup twice (disconnect, then free): unhook at the first call.
  auto& ev = self->ac_->ev;
  ev.data = nullptr;
  ev.addRead = ev.delRead = ev.addWrite = ev.delWrite = nullptr;
  ev.cleanup = nullptr;
  self->close();
  // Pending waits still hold the adapter; they see closed_ and return.
  auto keep = std::move(self->self_);
  (void)keep;
}

void asio_adapter::wait_read() {
  if (read_waiting_ || closed_) return;
  read_waiting_ = true;
  descriptor_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                         [self = shared_from_this()](boost::system::error_code ec) {
                           self->read_waiting_ = false;
                           if (ec || self->closed_ || !self->reading_) return;
                           auto anchor = self->anchor_.lock();
                           if (!anchor) return;
                           redisAsyncHandleRead(self->ac_);  // may free the context
                           if (!self->closed_ && self->reading_) self->wait_read();
                         });
}

// A socket is nearly always writable: write on the next turn of this thread (every command
// queued until then goes out in one write) instead of first waiting for the reactor to report
// it writable. Only if that write leaves data behind does it wait for writability.
void asio_adapter::flush_soon() {
  if (write_waiting_ || closed_) return;
  write_waiting_ = true;
  boost::asio::defer(descriptor_.get_executor(), [self = shared_from_this()] {
    self->write_waiting_ = false;
    if (self->closed_ || !self->writing_) return;
    auto anchor = self->anchor_.lock();
    if (!anchor) return;
    {
      sigpipe_guard guard;
      redisAsyncHandleWrite(self->ac_);  // may free the context
    }
    if (!self->closed_ && self->writing_) self->wait_write();
  });
}

void asio_adapter::wait_write() {
  if (write_waiting_ || closed_) return;
  write_waiting_ = true;
  descriptor_.async_wait(boost::asio::posix::stream_descriptor::wait_write,
                         [self = shared_from_this()](boost::system::error_code ec) {
                           self->write_waiting_ = false;
                           if (ec || self->closed_ || !self->writing_) return;
                           auto anchor = self->anchor_.lock();
                           if (!anchor) return;
                           {
                             sigpipe_guard guard;
                             redisAsyncHandleWrite(self->ac_);  // may free the context
                           }
                           if (!self->closed_ && self->writing_) self->wait_write();
                         });
}

}  // namespace baton::backends::redis::detail
