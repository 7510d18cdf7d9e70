#include "baton/scheduler/detail/job_pool.hpp"

#include <algorithm>

namespace baton::detail {

job_pool::job_pool(unsigned max_threads, std::chrono::milliseconds idle_exit)
    : max_threads_(std::max(1u, max_threads)), idle_exit_(idle_exit) {}

job_pool::~job_pool() { join(); }

void job_pool::post(std::function<void()> job) {
  std::lock_guard lock(mutex_);
  if (joining_) return;
  reap_locked();
  queue_.push_back(std::move(job));
  // Idle threads take queued jobs; a job beyond them gets a thread of its own.
  if (queue_.size() > idle_ && running_ < max_threads_) {
    ++running_;
    threads_.emplace_back([this] { work(); });
  } else {
    wake_.notify_one();
  }
}

void job_pool::work() {
  std::unique_lock lock(mutex_);
  for (;;) {
    if (queue_.empty()) {
      if (joining_) break;
      ++idle_;
      const bool woken =
          wake_.wait_for(lock, idle_exit_, [this] { return !queue_.empty() || joining_; });
      --idle_;
      // Idle for idle_exit: end, unless an asynchronous job is still running. The thread that
      // started it may be this one, and a process started from a thread (a command's
      // supervisor) gets its parent-death signal when that thread ends.
      if (!woken && held_ == 0) break;
      continue;
    }
    auto job = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    try {
      job();
    } catch (...) {
    }
    job = nullptr;  // its captures die outside the lock
    lock.lock();
  }
  --running_;
  ended_.push_back(std::this_thread::get_id());
  wake_.notify_all();  // join() waits for running_ == 0
}

void job_pool::reap_locked() {
  // A thread in ended_ has left work() but for releasing the lock: joining it is quick.
  for (auto id : ended_) {
    auto it = std::find_if(threads_.begin(), threads_.end(),
                           [id](const std::thread& t) { return t.get_id() == id; });
    if (it != threads_.end()) {
      it->join();
      threads_.erase(it);
    }
  }
  ended_.clear();
}

void job_pool::join() noexcept {
  std::list<std::thread> threads;
  {
    std::unique_lock lock(mutex_);
    joining_ = true;
    wake_.notify_all();
    wake_.wait(lock, [this] { return running_ == 0 && held_ == 0; });
    threads.swap(threads_);
    ended_.clear();
  }
  for (auto& t : threads)
    if (t.joinable()) t.join();
}

void job_pool::hold() {
  std::lock_guard lock(mutex_);
  ++held_;
}

void job_pool::release() {
  std::lock_guard lock(mutex_);
  --held_;
  wake_.notify_all();
}

void job_pool::reserve(unsigned n) {
  std::lock_guard lock(mutex_);
  max_threads_ = std::max(max_threads_, n);
}

std::size_t job_pool::threads() const {
  std::lock_guard lock(mutex_);
  return running_;
}

}  // namespace baton::detail
