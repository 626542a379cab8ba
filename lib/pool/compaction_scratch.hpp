#pragma once
// Internal to the pool: the host buffers of a compaction, kept for the next one.
//
// A compaction of n blocks fills several arrays of n entries (about 150 bytes per moved block in
// all). Fresh ones would come as fresh pages, which the kernel faults in and zeroes one by one: on
// 100,000 blocks that costs more than the work done in them. Kept, they cost their memory between
// compactions and nothing per compaction. Every buffer is cleared (not shrunk) before use.
#include <cstdint>
#include <vector>

#include <vramkit/compactor/chunk_plan.hpp>
#include <vramkit/compactor/plan.hpp>
#include <vramkit/detail/default_init_allocator.hpp>
#include <vramkit/heap.hpp>
#include <vramkit/pool.hpp>

namespace vramkit {

struct Pool::CompactionScratch {
  Layout layout;                                       ///< Live blocks of each segment, in address order.
  std::vector<compactor::Move> moves;                  ///< The plan.
  /// A full compaction's plan when the walk is shared (plan_slide): sized without zeroes.
  std::vector<compactor::Move, detail::DefaultInitAllocator<compactor::Move>> slide_moves;
  std::vector<std::uint64_t> segment_bases;            ///< Device address of each segment's offset 0.
  compactor::ChunkPlan chunks;                         ///< What the device executes.
  /// Each touched segment's blocks after the moves; sized, not zeroed, before parts fill them.
  std::vector<std::vector<HeapPlacement, detail::DefaultInitAllocator<HeapPlacement>>> placements;
  std::vector<std::uint8_t> touched;                   ///< Segments with a completed move.
  std::vector<BlockId> ids;                            ///< A rebuilt heap's new block ids.
  std::vector<std::size_t> arrivals;                   ///< Moves into each segment from another.
  /// A walk shared by threads (Pool::plan_slide): where its pieces start, and what each found.
  std::vector<BlockId> walk_starts;
  struct WalkPiece {
    std::vector<compactor::LiveBlock> blocks;  ///< Its live blocks, in address order.
    std::uint64_t bytes = 0;                   ///< Theirs in all.
    std::size_t live_before_free = 0;          ///< Its live blocks before its first free one; SIZE_MAX: none.
    unsigned walker = 0;                       ///< The team member that walked it.
    std::size_t first_index = 0;               ///< Of its first block among the segment's.
    std::uint64_t cursor = 0;                  ///< Where its first block slides to.
  };
  std::vector<WalkPiece> pieces;
  /// Whether plan_slide wrote `placements` for the plan's completion (no budget cut it short), and
  /// what each segment's moves move: update_heaps then takes them instead of merging the layout
  /// with the moves. Cleared by the update that takes them.
  bool placed_ahead = false;
  struct Moved {
    std::uint64_t blocks = 0, bytes = 0;
  };
  std::vector<Moved> moved;
};

}  // namespace vramkit
