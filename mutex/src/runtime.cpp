#include "baton/mutex/runtime.hpp"

#include <algorithm>
#include <boost/asio/executor_work_guard.hpp>

namespace baton {
namespace {
using work_guard = boost::asio::executor_work_guard<boost::asio::io_context::executor_type>;
thread_local const runtime* current_runtime = nullptr;
}  // namespace

runtime::runtime() : runtime(options{}) {}

runtime::runtime(options opts)
    : blocking_(std::max(1u, opts.blocking_threads)),
      work_(new work_guard(io_.get_executor()),
            [](void* p) { delete static_cast<work_guard*>(p); }) {
  unsigned n = std::max(1u, opts.io_threads);
  threads_.reserve(n);
  for (unsigned i = 0; i < n; ++i)
    threads_.emplace_back([this] {
      current_runtime = this;
      io_.run();
    });
}

runtime::~runtime() { stop(); }

bool runtime::on_io_thread() const noexcept { return current_runtime == this; }

void runtime::stop() noexcept {
  work_.reset();
  io_.stop();
  for (auto& t : threads_)
    if (t.joinable() && t.get_id() != std::this_thread::get_id()) t.join();
  threads_.clear();
  blocking_.stop();
  blocking_.join();
}

}  // namespace baton
