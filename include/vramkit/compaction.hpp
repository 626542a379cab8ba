#pragma once
// Compaction options and report: plain structs in, plain structs out (as VMA's defragmentation).
#include <chrono>
#include <cstdint>
#include <limits>

namespace vramkit {

enum class CompactGoal {
  full,  ///< Slide every movable block down; free space becomes one range per segment (less pins).
  hole,  ///< Make one free block of hole_bytes, moving as few bytes as possible.
};

struct CompactOptions {
  CompactGoal goal = CompactGoal::full;
  std::uint64_t hole_bytes = 0;       ///< For CompactGoal::hole.
  std::uint64_t hole_alignment = 256;
  std::uint64_t max_bytes_moved = std::numeric_limits<std::uint64_t>::max();  ///< Incremental budget.
  bool release_empty_segments = true;  ///< Empty trailing segments (evacuating them) and give them back.
};

struct CompactionReport {
  std::uint64_t blocks_moved = 0;
  std::uint64_t bytes_moved = 0;
  std::uint64_t segments_released = 0;
  std::uint64_t bytes_released = 0;
  double fragmentation_before = 0;
  double fragmentation_after = 0;
  std::uint64_t largest_free_before = 0;
  std::uint64_t largest_free_after = 0;
  bool goal_met = true;  ///< For a hole: whether one was made.
  /// The most threads that shared the update of one heap and its slots (PoolOptions::compaction_threads).
  unsigned update_threads = 1;
  /// The most threads that shared the walk and plan of one heap: more than 1 only for a full
  /// compaction in which every live block may move at the granularity.
  unsigned plan_threads = 1;
  /// Whether the team wrote the plan while the device moved what was written (a full compaction
  /// without a byte budget in which every live block may move at the granularity, unless
  /// PoolOptions::compaction_parts is `never`): the walk then also wrote the heaps' nodes, and
  /// update_threads counts only the threads that wrote the slots of blocks that stayed.
  bool written_while_moving = false;
  std::chrono::duration<double> seconds{0};          ///< End to end.
  /// Walking the heaps and planning the moves (host). A full compaction plans in parts inside
  /// execute_seconds, while the device moves the parts planned before (Pool::compact).
  std::chrono::duration<double> plan_seconds{0};
  /// For a plan written while the device moved it (written_while_moving): from the start of the
  /// walk until the device had the whole plan; in the rest of plan_seconds the team wrote what the
  /// update needs (slots, heaps' nodes) while the device moved.
  std::chrono::duration<double> plan_given_seconds{0};
  /// The whole Device::execute_moves call: chunking (host, or GPU for a slide), upload, kernel,
  /// wait, and the first update of slots and heaps (update_seconds), made during the call: on the
  /// CUDA device while the kernel moves the bytes, on the others after their synchronous moves.
  std::chrono::duration<double> execute_seconds{0};
  /// Rewriting slots and rebuilding heaps (host), inside execute_seconds; plus, only if a move
  /// failed, putting them back and applying the completed moves after it.
  std::chrono::duration<double> update_seconds{0};
};

}  // namespace vramkit
