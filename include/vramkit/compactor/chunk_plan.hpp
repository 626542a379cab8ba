#pragma once
// Executing moves: split them into chunks and order them so that overlapping moves keep memmove
// semantics without a staging copy.
//
// Chunks are handed out in ascending source address (the ticket). A chunk reads its whole source,
// marks it read, waits until every chunk whose source overlaps its destination has read, then
// writes. Those chunks hold earlier tickets whenever the destination lies below the source, so one
// launch cannot deadlock (the argument of CUB's decoupled look-back). Chunks that would wait on a
// later ticket (a block moving up into space another block leaves) go to a later phase; phases run
// one after another.
//
// Invariants of a ChunkPlan (validate() checks them):
//  - chunks are sorted by (phase, source address); sources are pairwise disjoint, as are
//    destinations; every chunk is at most chunk_bytes long;
//  - a chunk's dependencies are the contiguous ticket range [wait_first, wait_last] of its own phase,
//    all with tickets below its own; chunks of later phases never have sources that overlap
//    destinations of earlier ones.
#include <cstdint>
#include <vector>

#include <gsl/span>

#include <vramkit/compactor/plan.hpp>

namespace vramkit::compactor {

/// One copy between absolute device addresses (as the device layer sees them).
struct CopyRange {
  std::uint64_t source = 0;
  std::uint64_t destination = 0;
  std::uint64_t bytes = 0;
};

inline constexpr std::uint32_t no_wait = 0xFFFFFFFFu;

struct Chunk {
  std::uint64_t source = 0;
  std::uint64_t destination = 0;
  std::uint32_t bytes = 0;
  std::uint32_t move = 0;                ///< Index of the CopyRange this chunk belongs to.
  std::uint32_t wait_first = no_wait;    ///< Index (in the whole plan) of the first chunk to wait for.
  std::uint32_t wait_last = no_wait;     ///< Last chunk to wait for (inclusive); no_wait if none.
};

struct ChunkPlan {
  std::vector<Chunk> chunks;
  std::vector<std::uint32_t> phase_begin;  ///< Chunk index where each phase starts; plus the end.
  std::uint64_t total_bytes = 0;
  std::uint32_t chunk_bytes = 0;           ///< The limit the plan was split with; validate() checks it.

  std::size_t phases() const { return phase_begin.empty() ? 0 : phase_begin.size() - 1; }
  /// Throws std::logic_error naming the first broken invariant.
  void validate() const;
};

/// Cost: O(c log c) for c chunks; O(c) with no sort and no index arrays for a slide (the moves that
/// copy something have ascending, disjoint sources and destinations, each destination below its
/// source: what plan_full emits for a segment without fixed blocks). Throws std::logic_error if
/// destinations overlap each other or the moves contain a cycle (a swap), which the planner never
/// produces.
ChunkPlan make_chunk_plan(gsl::span<const CopyRange> moves, std::uint32_t chunk_bytes = 64 * 1024);

/// The same plan, written into `plan` so that its storage is reused (a pool compacting again).
/// After a throw, `plan` holds no valid plan.
void make_chunk_plan(gsl::span<const CopyRange> moves, ChunkPlan& plan,
                     std::uint32_t chunk_bytes = 64 * 1024);

/// The plan of the planner's moves, a move's device addresses being segment_bases[segment] plus its
/// offsets; chunk.move indexes `moves`. The same plan as for the moves' CopyRanges, without an
/// array of them.
void make_chunk_plan(gsl::span<const Move> moves, gsl::span<const std::uint64_t> segment_bases,
                     ChunkPlan& plan, std::uint32_t chunk_bytes = 64 * 1024);

/// Throws invalid_argument naming the first chunk whose move index is not below `move_count`
/// (Device::execute's count of the plan's moves).
void check_move_indices(const ChunkPlan& plan, std::size_t move_count);

/// Which of a plan's `move_count` moves are complete once its first `phases_run` phases have run
/// and no later one has: those with every chunk in those phases (1), the rest 0. A device that
/// runs the phases one after another and stops between two reports this. A move with chunks on
/// both sides (a plan without whole-move phases) counts as not complete: it may have written
/// part of its destination, which may be another block's source.
std::vector<std::uint8_t> moves_completed_by_phases(const ChunkPlan& plan, std::size_t phases_run,
                                                    std::size_t move_count);
/// The same, written into `completed` (one entry a move; every entry written), allocating nothing.
void moves_completed_by_phases(const ChunkPlan& plan, std::size_t phases_run, gsl::span<std::uint8_t> completed);

}  // namespace vramkit::compactor
