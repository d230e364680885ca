// PeriodicTask: runs `fn` on a thread of its own, first `first` after
// construction, then every `period`, until Stop. Stop wakes the thread at
// once and waits for a running `fn` to return; the destructor calls it.
// Used for maintenance that must not wait on a request path (the point
// card's purge of old idempotency keys).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace hotrow {

class PeriodicTask {
 public:
  PeriodicTask(std::chrono::milliseconds first, std::chrono::milliseconds period, std::function<void()> fn)
      : thread_([this, first, period, fn = std::move(fn)] {
          std::unique_lock lock(mutex_);
          for (auto wait = first; !wake_.wait_for(lock, wait, [this] { return stopped_; }); wait = period) {
            lock.unlock();
            fn();
            lock.lock();
          }
        }) {}
  ~PeriodicTask() { Stop(); }
  PeriodicTask(const PeriodicTask&) = delete;
  PeriodicTask& operator=(const PeriodicTask&) = delete;

  // Idempotent.
  void Stop() {
    {
      std::lock_guard lock(mutex_);
      stopped_ = true;
    }
    wake_.notify_all();
    if (thread_.joinable() && thread_.get_id() != std::this_thread::get_id()) thread_.join();
  }

 private:
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopped_ = false;  // guarded by mutex_; declared before thread_, which reads it
  std::thread thread_;
};

}  // namespace hotrow
