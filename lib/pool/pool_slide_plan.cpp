// A full compaction's walk and plan of one segment shared by the compaction team, for the common
// case in which every live block may move at the granularity (no pinned slot, no arena, none
// aligned above it). Each block then slides down to the sum of the live bytes before it in its
// segment, which are exactly compactor::plan_full's moves: the blocks before the segment's first
// free block stay, every later one moves.
//
// The heap's address-ordered list is cut at Heap::walk_starts into pieces, several a thread, which
// the threads take one at a time (a piece's length follows the spread of node ids over addresses,
// which after a compaction's rebuild is even). Each thread walks its pieces into lists of their own;
// the calling thread meanwhile sizes the layout and the moves. Then a pass over the pieces gives
// each its first block's index and destination, and each thread writes the layout entries and
// moves of the pieces it walked, whose lists its core's cache still holds. On 100,000 blocks one
// thread takes about 1 ms for the walk and plan with cold caches (docs/benchmarks.md, run 49).
#include "pool/pool_segment.hpp"
#include "pool/slide_place.hpp"
#include "pool/worker_team.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <new>

#include <gsl/assert>

namespace vramkit {
// Appends the segment's moves to the scratch's and fills its layout, whose room clear_layout took
// (as compact_full reserved the moves'); takes what it moves from `budget`, stopping as plan_full
// does. Throws std::bad_alloc, having moved nothing, if host memory for the pieces runs out.
void Pool::plan_slide(std::size_t segment, std::uint64_t& budget, CompactionReport& report) {
  CompactionScratch& scratch = *compaction_scratch_;
  const Heap& heap = segments_[segment]->heap;
  const std::size_t live = heap.allocated_blocks();
  LiveBlocks& blocks = scratch.layout[segment];
  auto& moves = scratch.slide_moves;
  const std::size_t base = moves.size();
  Expects(blocks.empty() && blocks.capacity() >= live && moves.capacity() - base >= live);
  const auto segment_id = static_cast<std::uint32_t>(segment);
  // The room compact_full took for the update: each block's place once every move completes.
  auto& placed = scratch.placements[segment];
  Expects(placed.empty() && placed.capacity() >= live);
  placed.resize(live);  // writes nothing
  // The blocks [first, first + count), the first sliding to `to`, from `from`: layout, moves and places.
  const auto place = [&](const compactor::LiveBlock* from, std::size_t first, std::size_t count, std::uint64_t to,
                         std::size_t stay) noexcept {
    pool_detail::place_slide(from, count, first, to, stay, segment_id, blocks.data(), moves.data() + base,
                             placed.data());
  };
  std::size_t stay = 0;

  const unsigned threads = team_ && live >= PoolOptions::parallel_update_min_blocks ? team_->size() : 1;
  if (threads == 1) {
    BlockId next = heap.first();
    walk_live_blocks(segment, next, SIZE_MAX, blocks);  // within its room: no allocation
    while (stay < live && blocks[stay].offset == (stay == 0 ? 0 : blocks[stay - 1].offset + blocks[stay - 1].bytes))
      ++stay;
    moves.resize(base + live - stay);  // within its room, and writes nothing
    place(blocks.data(), 0, live, 0, stay);
  } else {
    const std::size_t wanted = std::clamp<std::size_t>(live / CompactionScratch::blocks_per_piece, threads,
                                                       threads * CompactionScratch::pieces_per_thread);
    heap.walk_starts(wanted, scratch.walk_starts);
    const std::size_t count = scratch.walk_starts.size();
    if (scratch.pieces.size() < count) scratch.pieces.resize(count);
    std::atomic<std::size_t> next_piece{0};
    std::atomic<bool> out_of_memory{false};
    team_->run([&](unsigned thread) noexcept {
      if (thread == 0) {  // within the room taken before, and writes nothing
        blocks.resize(live);
        moves.resize(base + live);
      }
      for (std::size_t index; (index = next_piece.fetch_add(1, std::memory_order_relaxed)) < count;) {
        CompactionScratch::WalkPiece& piece = scratch.pieces[index];
        piece.blocks.clear();
        piece.walker = thread;
        const BlockId end = index + 1 < count ? scratch.walk_starts[index + 1] : no_block;
        std::uint64_t bytes = 0;
        std::size_t live_before_free = SIZE_MAX;
        try {
          live_before_free = pool_detail::walk_piece(heap, scratch.walk_starts[index], end, options_.granularity,
                                                     piece.blocks, bytes);
        } catch (const std::bad_alloc&) {  // a piece's list grew past what earlier compactions left
          out_of_memory.store(true, std::memory_order_relaxed);
          return;
        }
        piece.bytes = bytes;
        piece.live_before_free = live_before_free;
      }
    });
    if (out_of_memory.load()) {
      blocks.clear();
      moves.resize(base);
      throw std::bad_alloc();
    }
    // Each piece's first index and destination; the segment's first free block ends the blocks that stay.
    std::size_t index = 0;
    stay = SIZE_MAX;
    std::uint64_t cursor = 0;
    for (std::size_t piece_index = 0; piece_index < count; ++piece_index) {
      CompactionScratch::WalkPiece& piece = scratch.pieces[piece_index];
      if (stay == SIZE_MAX && piece.live_before_free != SIZE_MAX) stay = index + piece.live_before_free;
      piece.first_index = index;
      piece.cursor = cursor;
      index += piece.blocks.size();
      cursor += piece.bytes;
    }
    Ensures(index == live);
    stay = std::min(stay, live);
    team_->run([&](unsigned thread) noexcept {  // the pieces each thread walked, still in its core's cache
      for (std::size_t piece_index = 0; piece_index < count; ++piece_index) {
        const CompactionScratch::WalkPiece& piece = scratch.pieces[piece_index];
        if (piece.walker == thread) place(piece.blocks.data(), piece.first_index, piece.blocks.size(), piece.cursor, stay);
      }
    });
    moves.resize(base + live - stay);
    report.plan_threads = std::max(report.plan_threads, threads);
  }

  note_slide_moved(segment, stay, stay == 0 ? 0 : blocks[stay - 1].offset + blocks[stay - 1].bytes);
  if (budget != UINT64_MAX) {  // plan_full's stop: the moves up to the first that would pass the budget
    std::size_t kept = base;
    for (; kept < moves.size() && moves[kept].bytes <= budget; ++kept) budget -= moves[kept].bytes;
    moves.resize(kept);
  }
}

// What a segment's slide moves, the blocks before `stay` keeping their places, which end at
// `staying` (scratch.moved): the blocks that stay are packed from offset 0, so what moves is the
// rest of the live bytes.
void Pool::note_slide_moved(std::size_t segment, std::size_t stay, std::uint64_t staying) {
  CompactionScratch& scratch = *compaction_scratch_;
  const Heap& heap = segments_[segment]->heap;
  scratch.moved[segment] = {heap.allocated_blocks() - stay, heap.capacity() - heap.free_bytes() - staying};
}

// The layout before a slide that write_slide did not write (layout_unwritten), for an update that
// falls back to the merge: each segment's blocks that stay, from their places (which write_slide
// wrote, and the update has not cleared yet), then its moved blocks, from the sources of `moves`
// (the whole plan: segment after segment, each in address order). Writes within the room taken.
void Pool::layout_from_slide(gsl::span<const compactor::Move> moves) {
  CompactionScratch& scratch = *compaction_scratch_;
  Expects(scratch.placements.size() == segments_.size() && scratch.moved.size() == segments_.size());
  std::size_t move = 0;
  for (std::size_t segment = 0; segment < segments_.size(); ++segment) {
    LiveBlocks& blocks = scratch.layout[segment];
    blocks.clear();
    const auto& placed = scratch.placements[segment];
    const std::size_t moving = scratch.moved[segment].blocks;
    Expects(moving <= placed.size() && moves.size() - move >= moving);
    const std::size_t stay = placed.size() - moving;
    for (std::size_t at = 0; at < stay; ++at)
      blocks.push_back({placed[at].offset, placed[at].bytes, options_.granularity, true, placed[at].tag});
    for (const compactor::Move& each : moves.subspan(move, moving))
      blocks.push_back({each.from_offset, each.bytes, options_.granularity, true, each.tag});
    move += moving;
  }
  Ensures(move == moves.size());
}

}  // namespace vramkit
