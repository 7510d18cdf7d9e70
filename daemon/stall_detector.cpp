#include "stall_detector.hpp"

#include <atomic>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include "baton/mutex/detail/log.hpp"

namespace baton::daemon {

namespace asio = boost::asio;
using std::chrono::milliseconds;
using std::chrono::steady_clock;

struct stall_detector::state : std::enable_shared_from_this<state> {
  state(asio::io_context& io, milliseconds p, milliseconds t)
      : strand(asio::make_strand(io)), timer(strand), period(p), threshold(t) {}

  /// Arms the timer for now + period; on the strand.
  void arm() {
    if (stopped.load(std::memory_order_acquire)) return;
    const steady_clock::time_point planned = steady_clock::now() + period;
    timer.expires_at(planned);
    timer.async_wait([self = shared_from_this(), planned](const boost::system::error_code& ec) {
      if (ec || self->stopped.load(std::memory_order_acquire)) return;
      if (auto late = stalled_for(planned, steady_clock::now(), self->threshold))
        detail::log({.event = "process.stalled"})
            .warn(
                "the process stalled for {} ms (a {} ms timer woke {} ms late): it was stopped "
                "(SIGSTOP), starved of CPU or swapped out; leases may have run out locally "
                "meanwhile",
                late->count(), self->period.count(), late->count());
      self->arm();
    });
  }

  asio::strand<asio::io_context::executor_type> strand;
  asio::steady_timer timer;
  milliseconds period;
  milliseconds threshold;
  std::atomic<bool> stopped{false};
};

stall_detector::stall_detector(asio::io_context& io, milliseconds period, milliseconds threshold)
    : state_(std::make_shared<state>(io, period, threshold)) {
  asio::post(state_->strand, [s = state_] { s->arm(); });
}

stall_detector::~stall_detector() { stop(); }

void stall_detector::stop() noexcept {
  if (!state_ || state_->stopped.exchange(true, std::memory_order_acq_rel)) return;
  try {
    // The timer belongs to the strand: cancel it there.
    asio::post(state_->strand, [s = state_] { s->timer.cancel(); });
  } catch (...) {
    // The io_context may be gone: nothing is pending then.
  }
}

}  // namespace baton::daemon
