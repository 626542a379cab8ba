#pragma once
// Internal to the pool: a fixed team of threads for a compaction's walk, plan and update
// (Pool::plan_slide, Pool::write_slide, Pool::update_heaps).
// run(task) calls task(k) once for every k < size(): task 0 on the calling thread, task k always on
// the team's k-th thread, so that part k of one pass runs on the thread that ran part k of the pass
// before (whose core's cache, unless the thread moved, still holds that part's placements and
// ids). Between runs a thread spins for a while (runs of one compaction follow each other within
// microseconds, and a thread woken from sleep takes tens of them to start), then sleeps; a team
// larger than the hardware's threads does not spin (a spinning thread would hold a core that
// another member needs).
#include <atomic>
#include <chrono>
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
  /// Whether its threads spin between runs (at most as many members as the hardware's threads):
  /// otherwise a task that waits on another member should yield at once.
  bool spins() const { return spin_; }

  /// How long a thread spins for the next run, and the caller for the end of one, before sleeping.
  static constexpr std::chrono::microseconds spin_time{200};

  /// task(k) for every k < size(), at the same time; returns once every call has returned. The
  /// task must not throw. Allocates nothing.
  template <class Task>
  void run(Task&& task) noexcept {
    start(task);
    task(0u);
    join();
  }

  /// task(k) for every 0 < k < size() on the team's threads, returning at once: the calling thread
  /// goes on with other work (a compaction queues moves while the team plans them). join() waits
  /// for those calls; the task must outlive it. No other run may start before join().
  template <class Task>
  void start(Task& task) noexcept {
    using Callable = std::remove_reference_t<Task>;
    start_erased(const_cast<void*>(static_cast<const void*>(&task)),
                 [](void* context, unsigned part) noexcept { (*static_cast<Callable*>(context))(part); });
  }
  /// Waits for the calls that start() began; at once if there are none (or join() waited already).
  void join() noexcept;
  /// Wakes the threads asleep, which then spin for the next run (spin_time) before sleeping again:
  /// a caller with some work of its own to do before start() calls it first, so that the team
  /// wakes meanwhile. Allocates nothing.
  void wake() noexcept;

 private:
  using Call = void (*)(void* context, unsigned part) noexcept;
  void start_erased(void* context, Call call) noexcept;
  void work(unsigned part) noexcept;
  void stop() noexcept;

  std::mutex mutex_;
  std::condition_variable wake_;  ///< A new run (generation_), or stop_, for the threads asleep.
  std::condition_variable done_;  ///< running_ reached 0, for a caller asleep.
  void* context_ = nullptr;       ///< Written before generation_ moves on; read after a thread sees it.
  Call call_ = nullptr;
  std::atomic<std::uint64_t> generation_{0};  ///< Moved on (under mutex_) to start a run.
  std::atomic<unsigned> running_{0};          ///< Threads of the current run still in their task.
  std::atomic<bool> stop_{false};
  unsigned sleepers_ = 0;    ///< Threads waiting on wake_ (under mutex_).
  std::uint64_t wakes_ = 0;  ///< Moved on by wake() (under mutex_).
  bool spin_ = true;         ///< At most as many members as the hardware has threads.
  bool started_ = false;     ///< start() began calls that join() has not waited for (the caller's only).
  std::vector<std::thread> threads_;
};

}  // namespace vramkit
