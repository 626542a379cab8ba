#include "pool/worker_team.hpp"

#include <gsl/assert>

namespace vramkit {

WorkerTeam::WorkerTeam(unsigned size) {
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
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& thread : threads_) thread.join();
  threads_.clear();
}

void WorkerTeam::run_erased(void* context, Call call) noexcept {
  if (!threads_.empty()) {
    {
      std::lock_guard lock(mutex_);
      context_ = context;
      call_ = call;
      running_ = static_cast<unsigned>(threads_.size());
      ++generation_;
    }
    wake_.notify_all();
  }
  call(context, 0);
  if (threads_.empty()) return;
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return running_ == 0; });
}

// A thread's life: wait for a run it has not seen, run its part, report. The caller waits for
// every thread before it starts the next run, so no thread can miss one.
void WorkerTeam::work(unsigned part) noexcept {
  std::uint64_t seen = 0;
  std::unique_lock lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stop_ || generation_ != seen; });
    if (stop_) return;
    seen = generation_;
    void* const context = context_;
    const Call call = call_;
    lock.unlock();
    call(context, part);
    lock.lock();
    if (--running_ == 0) done_.notify_one();
  }
}

}  // namespace vramkit
