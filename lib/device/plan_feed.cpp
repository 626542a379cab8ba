// The planner's thread and the hand-over of what it plans (plan_feed.hpp).
#include "device/plan_feed.hpp"

#include <stdexcept>

namespace vramkit::detail {

PlanFeed::PlanFeed(std::vector<compactor::Move>& moves, const Device::PlanMore& plan_more)
    : moves_(moves), plan_more_(plan_more) {
  part_ends_.reserve(16);
  progress_.moves = moves.size();
  thread_ = std::thread([this] { run(); });
}

PlanFeed::~PlanFeed() {
  stop_.store(true, std::memory_order_relaxed);
  if (thread_.joinable()) thread_.join();
}

void PlanFeed::run() noexcept {
  try {
    const compactor::Move* storage = moves_.data();
    for (Device::Planned step = Device::Planned::batch; step != Device::Planned::all;) {
      if (stop_.load(std::memory_order_relaxed)) return;
      step = plan_more_(moves_);
      // The caller reads the moves published before while this plans: they must stay put.
      if (moves_.data() != storage)
        throw std::logic_error("a compaction's planner reallocated its moves while the device read them");
      storage = moves_.data();
      publish(moves_.size(), step == Device::Planned::part, step == Device::Planned::all);
    }
  } catch (...) {
    std::lock_guard lock(mutex_);
    error_ = std::current_exception();
    progress_.done = true;
    progress_.version = version_.load(std::memory_order_relaxed) + 1;
    version_.store(progress_.version, std::memory_order_release);
  }
}

void PlanFeed::publish(std::size_t moves, bool part_ended, bool done) {
  std::lock_guard lock(mutex_);
  progress_.moves = moves;
  if (part_ended) {
    part_ends_.push_back(moves);
    progress_.parts = part_ends_.size();
  }
  progress_.done = done;
  progress_.version = version_.load(std::memory_order_relaxed) + 1;
  version_.store(progress_.version, std::memory_order_release);
}

PlanFeed::Progress PlanFeed::wait_beyond(const Progress& seen) {
  for (unsigned spins = 0; version_.load(std::memory_order_acquire) == seen.version; ++spins) {
    if (spins >= 256) std::this_thread::yield();
  }
  std::lock_guard lock(mutex_);
  return progress_;
}

std::size_t PlanFeed::part_end(std::size_t part) const {
  std::lock_guard lock(mutex_);
  return part_ends_.at(part);
}

void PlanFeed::finish() {
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(error_);
}

}  // namespace vramkit::detail
