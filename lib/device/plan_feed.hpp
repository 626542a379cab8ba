#pragma once
// A Device::PlanMore run on a thread of its own: the CUDA device stages and queues the moves it
// publishes while it plans the next ones (a compaction in parts). Host code only.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <thread>
#include <vector>

#include <vramkit/device.hpp>

namespace vramkit::detail {

class PlanFeed {
 public:
  /// What the planner has published: moves[0, moves) are final, `parts` parts have ended (their
  /// ends: part_end()), and `done` once the plan is complete or the planner threw (finish() says).
  struct Progress {
    std::size_t moves = 0;
    std::size_t parts = 0;
    bool done = false;
    std::uint64_t version = 0;  ///< Publications so far.
  };

  /// Starts planning at once. The planner must not reallocate `moves` (Device::PlanMore).
  PlanFeed(std::vector<compactor::Move>& moves, const Device::PlanMore& plan_more);
  /// Stops the planner after its current call and joins its thread.
  ~PlanFeed();
  PlanFeed(const PlanFeed&) = delete;
  PlanFeed& operator=(const PlanFeed&) = delete;

  /// Waits until the planner publishes something after `seen` (spinning: a publication comes every
  /// few microseconds while it plans), and returns it.
  Progress wait_beyond(const Progress& seen);
  /// The end (an index into the moves) of part `part` < Progress::parts.
  std::size_t part_end(std::size_t part) const;
  /// Waits for the planner to finish; rethrows what it threw.
  void finish();

 private:
  void run() noexcept;
  void publish(std::size_t moves, bool part_ended, bool done);

  std::vector<compactor::Move>& moves_;
  const Device::PlanMore& plan_more_;
  mutable std::mutex mutex_;
  Progress progress_;                  ///< Guarded by mutex_.
  std::vector<std::size_t> part_ends_;  ///< Guarded by mutex_.
  std::exception_ptr error_;           ///< Guarded by mutex_.
  std::atomic<std::uint64_t> version_{0};
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace vramkit::detail
