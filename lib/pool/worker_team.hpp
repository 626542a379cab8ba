#pragma once
// Internal to the pool: a fixed team of threads for a compaction's update (Pool::update_heaps).
// run(task) calls task(k) once for every k < size(): task 0 on the calling thread, task k always on
// the team's k-th thread, so that part k of one pass runs on the thread that ran part k of the pass
// before (whose core's cache, unless the thread moved, still holds that part's placements and
// ids). The threads sleep between runs.
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <thread>
#include <type_traits>
#include <vector>

namespace vramkit {

class WorkerTeam {
 public:
  /// Starts size - 1 threads (size >= 1). Throws std::system_error when one cannot start, having
  /// stopped those that did.
  explicit WorkerTeam(unsigned size);
  ~WorkerTeam();
  WorkerTeam(const WorkerTeam&) = delete;
  WorkerTeam& operator=(const WorkerTeam&) = delete;

  unsigned size() const { return static_cast<unsigned>(threads_.size()) + 1; }

  /// task(k) for every k < size(), at the same time; returns once every call has returned. The
  /// task must not throw. Allocates nothing.
  template <class Task>
  void run(Task&& task) noexcept {
    using Callable = std::remove_reference_t<Task>;
    run_erased(const_cast<void*>(static_cast<const void*>(&task)),
               [](void* context, unsigned part) noexcept { (*static_cast<Callable*>(context))(part); });
  }

 private:
  using Call = void (*)(void* context, unsigned part) noexcept;
  void run_erased(void* context, Call call) noexcept;
  void work(unsigned part) noexcept;
  void stop() noexcept;

  std::mutex mutex_;
  std::condition_variable wake_;  ///< A new run (generation_), or stop_.
  std::condition_variable done_;  ///< running_ reached 0.
  void* context_ = nullptr;
  Call call_ = nullptr;
  std::uint64_t generation_ = 0;
  unsigned running_ = 0;  ///< Threads of the current run still in their task.
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

}  // namespace vramkit
