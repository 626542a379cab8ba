#pragma once
// The pool's lock. Its critical sections last tens of nanoseconds, so the cost of taking and
// releasing an uncontended lock is what matters: one atomic exchange to lock, a plain release
// store to unlock. std::mutex pays a locked instruction for each in a multithreaded process (any
// process with a CUDA context is one): on the development VM, an allocate+free pair of the pool
// took 43 ns with std::mutex and 30 ns with this lock. Contended, a thread
// spins on a plain load for a short while, then yields its time slice between attempts (a holder
// that was preempted gets to run), then sleeps 20 us between attempts: the pool also holds its lock
// through long waits (a compaction's kernel, a free that waits for a stream).
#include <atomic>
#include <chrono>
#include <thread>

namespace vramkit::detail {

class SpinMutex {
 public:
  void lock() noexcept {
    if (!held_.exchange(true, std::memory_order_acquire)) return;
    lock_contended();
  }
  bool try_lock() noexcept {
    return !held_.load(std::memory_order_relaxed) && !held_.exchange(true, std::memory_order_acquire);
  }
  void unlock() noexcept { held_.store(false, std::memory_order_release); }

 private:
  void lock_contended() noexcept {
    for (unsigned attempt = 0;; ++attempt) {
      while (held_.load(std::memory_order_relaxed)) {
        if (attempt >= yields_before_sleep) std::this_thread::sleep_for(std::chrono::microseconds(20));
        else if (attempt >= spins_before_yield) std::this_thread::yield();
        ++attempt;
      }
      if (!held_.exchange(true, std::memory_order_acquire)) return;
    }
  }

  static constexpr unsigned spins_before_yield = 64;
  static constexpr unsigned yields_before_sleep = 64 + 256;
  std::atomic<bool> held_{false};
};

}  // namespace vramkit::detail
