#pragma once
// Internal to the pool: the host buffers of a compaction, kept for the next one.
//
// A compaction of n blocks fills several arrays of n entries (about 150 bytes per moved block in
// all). Fresh ones would come as fresh pages, which the kernel faults in and zeroes one by one: on
// 100,000 blocks that costs more than the work done in them. Kept, they cost their memory between
// compactions and nothing per compaction. Every buffer is cleared (not shrunk) before use.
#include <cstdint>
#include <vector>

#include "compactor/slide_math.hpp"
#include <vramkit/compactor/chunk_plan.hpp>
#include <vramkit/compactor/plan.hpp>
#include <vramkit/detail/default_init_allocator.hpp>
#include <vramkit/heap.hpp>
#include <vramkit/pool.hpp>

namespace vramkit {
namespace pool_detail {

/// Where a piece of a shared walk stands (Pool::write_slide): being walked; its end published
/// (CompactionScratch::WalkPiece's first_index, cursor, stay and moves); or also ready for the
/// device (its moves, or its staged records when the device takes them). Its places, nodes and
/// slots are written by a later pass, which the device does not wait for.
enum WalkState : unsigned { walking = 0, published = 1, ready = 2 };

}  // namespace pool_detail

struct Pool::CompactionScratch {
  Layout layout;                                       ///< Live blocks of each segment, in address order.
  std::vector<compactor::Move> moves;                  ///< The plan.
  /// A full compaction's plan when the walk is shared (plan_slide): sized without zeroes.
  std::vector<compactor::Move, detail::DefaultInitAllocator<compactor::Move>> slide_moves;
  std::vector<std::uint64_t> segment_bases;            ///< Device address of each segment's offset 0.
  compactor::ChunkPlan chunks;                         ///< What the device executes.
  /// Each touched segment's blocks after the moves; sized, not zeroed, before parts fill them.
  /// write_slide with nodes_ahead fills only the entries the update reads: the blocks that stay
  /// and each segment's last block.
  std::vector<std::vector<HeapPlacement, detail::DefaultInitAllocator<HeapPlacement>>> placements;
  std::vector<std::uint8_t> touched;                   ///< Segments with a completed move.
  std::vector<BlockId> ids;                            ///< A rebuilt heap's new block ids.
  std::vector<std::size_t> arrivals;                   ///< Moves into each segment from another.
  /// A walk shared by threads (Pool::plan_slide, Pool::write_slide): where its pieces start, and
  /// what each found.
  std::vector<BlockId> walk_starts;
  /// The mean number of blocks a piece of a walk covers, and the most pieces a thread: pieces much
  /// smaller cost more in claims than they even out; fewer leave a thread waiting on a long one.
  static constexpr std::size_t blocks_per_piece = 1024;
  static constexpr std::size_t pieces_per_thread = 16;
  /// On cache lines of its own: threads on different cores walk neighbouring pieces at once. What
  /// the walk writes at every block (the list's end) and what other threads wait on (the state, in
  /// write_slide) lie on different lines: a thread polling a line that another writes at every
  /// block slows that walk to a coherence miss a block.
  struct alignas(64) WalkPiece {
    std::vector<compactor::LiveBlock> blocks;  ///< plan_slide: its live blocks, in address order.
    std::uint64_t bytes = 0;                   ///< Theirs in all.
    std::size_t live_before_free = 0;          ///< plan_slide: its live blocks before its first free one; SIZE_MAX: none.
    unsigned walker = 0;                       ///< plan_slide: the team member that walked it.
    // write_slide only: the piece's place in the whole walk.
    std::uint32_t segment = 0;
    BlockId start = no_block, end = no_block;  ///< Its blocks: from start up to end (not included).
    /// A pool_detail::WalkState, through std::atomic_ref; the fields after it are published with it.
    alignas(64) unsigned state = 0;
    std::size_t first_index = 0;               ///< Of its first block among the segment's.
    std::size_t live = 0;                      ///< write_slide: its live blocks.
    std::uint64_t cursor = 0;                  ///< Where its first block slides to.
    // write_slide only: how far the plan reaches after it.
    std::size_t stay = 0;        ///< The segment's blocks that stay, if its first free block is known; else SIZE_MAX.
    std::size_t moves_base = 0;  ///< Index in the plan of the segment's first move.
    std::size_t moves_end = 0;   ///< Of the plan's moves, those of the pieces up to this one.
    std::uint64_t chunks_end = 0;  ///< The chunks of those moves, when they are staged (Device::slide_chunk_bytes).
    std::uint64_t first_chunk = 0;  ///< The chunks of the moves before its own, when staged.
  };
  std::vector<WalkPiece> pieces;
  /// Whether plan_slide wrote `placements` for the plan's completion (no budget cut it short), and
  /// what each segment's moves move: update_heaps then takes them instead of merging the layout
  /// with the moves. Cleared by the update that takes them.
  bool placed_ahead = false;
  /// Whether write_slide also wrote the slots of the blocks that move (place and block id, as the
  /// rebuild will number them): the update then writes only those of the blocks that stay. Taken
  /// with placed_ahead; a fallback to the merge writes every slot again.
  bool slots_ahead = false;
  /// Whether write_slide also wrote each touched heap's nodes as its rebuild would
  /// (Heap::write_packed): the update then adopts them. Taken with slots_ahead.
  bool nodes_ahead = false;
  /// Whether write_slide left the layout unwritten: an update that falls back to the merge makes
  /// it first from the places of the blocks that stay and the moves' sources (Pool::layout_from_slide).
  bool layout_unwritten = false;
  /// Host memory of the device's (Device::obtain_staging, pinned on the CUDA device) where
  /// write_slide stages its moves as the device uploads them, with room for staging_moves;
  /// released by ~Pool. Each pool has its own: pools may share a device.
  compactor::detail::SlideMove* staging = nullptr;
  std::size_t staging_moves = 0;
  /// Whether write_slide staged this compaction's moves there.
  bool slide_staged = false;
  struct Moved {
    std::uint64_t blocks = 0, bytes = 0;
  };
  std::vector<Moved> moved;
};

}  // namespace vramkit
