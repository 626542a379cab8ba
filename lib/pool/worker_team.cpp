#include "pool/worker_team.hpp"

#include <algorithm>

#include <gsl/assert>

namespace vramkit {

WorkerTeam::WorkerTeam(unsigned size) : spin_(size <= std::max(1u, std::thread::hardware_concurrency())) {
  Expects(size >= 1);
  threads_.reserve(size - 1);
  try {
    for (unsigned part = 1; part < size; ++part) threads_.emplace_back([this, part] { work(part); });
  } catch (...) {
    stop();
    throw;
  }
}

WorkerTeam::~WorkerTeam() { stop(); }

void WorkerTeam::stop() noexcept {
  {
    std::lock_guard lock(mutex_);
    stop_.store(true);
  }
  wake_.notify_all();
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
}

namespace {

/// Whether ready() became true within WorkerTeam::spin_time (at once, without spinning, unless
/// `spin`), checking it all the while and yielding now and then (other threads may need the core).
template <class Ready>
bool spin_until(bool spin, Ready&& ready) noexcept {
  if (!spin) return ready();
  const auto deadline = std::chrono::steady_clock::now() + WorkerTeam::spin_time;
  for (unsigned round = 1;; ++round) {
    if (ready()) return true;
    if (round % 64 == 0) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::yield();
    }
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  }
}

}  // namespace

void WorkerTeam::start_erased(void* context, Call call) noexcept {
  if (threads_.empty()) return;
  context_ = context;
  call_ = call;
  running_.store(static_cast<unsigned>(threads_.size()), std::memory_order_relaxed);
  started_ = true;
  bool wake = false;
  {
    // Under the lock: a thread going to sleep either sees the new generation or is counted.
    std::lock_guard lock(mutex_);
    generation_.fetch_add(1, std::memory_order_release);
    wake = sleepers_ != 0;
  }
  if (wake) wake_.notify_all();
}

void WorkerTeam::wake() noexcept {
  if (threads_.empty() || !spin_) return;  // a team that does not spin would only sleep again
  bool wake = false;
  {
    std::lock_guard lock(mutex_);
    ++wakes_;
    wake = sleepers_ != 0;
  }
  if (wake) wake_.notify_all();
}

void WorkerTeam::join() noexcept {
  if (!started_) return;
  started_ = false;
  if (spin_until(spin_, [this] { return running_.load(std::memory_order_acquire) == 0; })) return;
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return running_.load(std::memory_order_acquire) == 0; });
}

// A thread's life: wait (spinning, then asleep, then spinning again when woken ahead of a run) for
// a run it has not seen, run its part, report.
// The caller waits for every thread before it starts the next run, so no thread can miss one.
void WorkerTeam::work(unsigned part) noexcept {
  std::uint64_t seen = 0;
  for (;;) {
    const auto started = [&] {
      return stop_.load(std::memory_order_relaxed) || generation_.load(std::memory_order_acquire) != seen;
    };
    if (!spin_until(spin_, started)) {
      std::unique_lock lock(mutex_);
      const std::uint64_t wakes = wakes_;
      ++sleepers_;
      wake_.wait(lock, [&] { return started() || wakes_ != wakes; });
      --sleepers_;
      if (!started()) continue;  // woken ahead of a run (wake()): spin for it
    }
    if (stop_.load()) return;
    seen = generation_.load(std::memory_order_acquire);
    call_(context_, part);
    if (running_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard lock(mutex_);  // a caller asleep checks running_ under it: no wake-up is lost
      done_.notify_one();
    }
  }
}

}  // namespace vramkit
