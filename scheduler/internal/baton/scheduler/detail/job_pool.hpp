#pragma once
/// The scheduler's job threads: an elastic pool. It starts a thread only when a job comes and
/// every thread it has is busy (up to `max_threads`), and a thread that has been idle for
/// `idle_exit` ends. So a daemon with a thousand rarely firing schedules holds a few threads,
/// and still no schedule waits for a thread while fewer than `max_threads` jobs run.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <list>
#include <mutex>
#include <thread>
#include <vector>

namespace baton::detail {

class job_pool {
 public:
  explicit job_pool(unsigned max_threads,
                    std::chrono::milliseconds idle_exit = std::chrono::seconds{60});
  job_pool(const job_pool&) = delete;
  job_pool& operator=(const job_pool&) = delete;
  /// join()s.
  ~job_pool();

  /// Runs `job` on an idle thread, on a new one if all are busy and fewer than max_threads run,
  /// else as soon as a thread is free. An exception from a job is swallowed (jobs catch their
  /// own). After join() a job is dropped.
  void post(std::function<void()> job);
  /// Runs what is queued, waits until every hold() was released, then ends and joins every
  /// thread. Idempotent; never throws.
  void join() noexcept;
  /// An asynchronous job is running (started from a pool thread, it ends elsewhere): join()
  /// waits for the matching release(), and no idle thread ends meanwhile (a process the job
  /// started from it gets its parent-death signal when that thread ends).
  void hold();
  void release();
  /// Raises the most threads to at least `n` (never lowers it).
  void reserve(unsigned n);
  /// Threads now (running a job or idle).
  std::size_t threads() const;

 private:
  void work();
  void reap_locked();  // joins threads that ended on their own

  unsigned max_threads_;  // guarded by mutex_
  const std::chrono::milliseconds idle_exit_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;
  std::list<std::thread> threads_;
  std::vector<std::thread::id> ended_;
  std::size_t running_ = 0;  // threads that have not ended
  std::size_t idle_ = 0;     // of those, waiting for a job
  std::size_t held_ = 0;     // asynchronous jobs running (hold() without release())
  bool joining_ = false;
};

}  // namespace baton::detail
