#pragma once
// Internal to the pool: where a full compaction's slide puts a run of a segment's live blocks
// (Pool::plan_slide, Pool::write_slide). Each block slides to the sum of the live bytes before it.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "compactor/chunk_plan_paths.hpp"
#include <vramkit/compactor/plan.hpp>
#include <vramkit/heap.hpp>

namespace vramkit::pool_detail {

/// `count` blocks from `from`, the first at index `first` of the segment's live blocks and sliding
/// to `to`, the rest packed after it: each written into the segment's `layout` (unless `from` is
/// that entry), into `placed` (its place once every move completes), and, from index `stay` on
/// (the blocks before it keep their places, which are then `to`), into `moves` (moves[at - stay]
/// for the block at index `at`). Writes nothing else and allocates nothing.
inline void place_slide(const compactor::LiveBlock* from, std::size_t count, std::size_t first, std::uint64_t to,
                        std::size_t stay, std::uint32_t segment, compactor::LiveBlock* layout,
                        compactor::Move* moves, HeapPlacement* placed) noexcept {
  for (std::size_t at = first; at < first + count; ++at, ++from) {
    const compactor::LiveBlock& block = *from;
    if (&layout[at] != from) layout[at] = block;
    if (at >= stay)
      moves[at - stay] = {.tag = block.tag,
                          .from_segment = segment,
                          .from_offset = block.offset,
                          .to_segment = segment,
                          .to_offset = to,
                          .bytes = block.bytes};
    placed[at] = {to, block.bytes, block.tag};
    to += block.bytes;
  }
}

/// Walks `heap`'s blocks from `start` up to `end` (not included), appending the live ones to
/// `blocks`, movable at `granularity`, their bytes added to `bytes`. Returns how many live blocks
/// came before the first free one (SIZE_MAX: no free one). Throws std::bad_alloc when `blocks`
/// cannot grow.
inline std::size_t walk_piece(const Heap& heap, BlockId start, BlockId end, std::uint64_t granularity,
                              std::vector<compactor::LiveBlock>& blocks, std::uint64_t& bytes) {
  std::size_t live_before_free = SIZE_MAX;
  for (BlockId id = start; id != end; id = heap.next(id)) {
    const HeapBlock block = heap.block(id);
    if (block.free) {
      live_before_free = std::min(live_before_free, blocks.size());
      continue;
    }
    blocks.push_back({block.offset, block.bytes, granularity, true, block.tag});
    bytes += block.bytes;
  }
  return live_before_free;
}

/// What a piece of a heap's list holds (count_piece): its live blocks and their bytes, how many
/// live blocks come before its first free block (SIZE_MAX: none is free), and the chunks of its
/// live blocks, in all and after its first free block (when counted: chunk_bytes != 0).
struct PieceCount {
  std::size_t live = 0;
  std::size_t live_before_free = SIZE_MAX;
  std::uint64_t bytes = 0;
  std::uint64_t chunks = 0;
  std::uint64_t chunks_after_free = 0;
};

/// Counts `heap`'s blocks from `start` up to `end` (not included), in chunks of `chunk_bytes` too
/// unless it is 0, calling each(tag) for each live block. Reads the nodes only: the pass that
/// writes (Pool::write_slide) walks them again from the core's cache.
template <class Each>
PieceCount count_piece(const Heap& heap, BlockId start, BlockId end, std::uint32_t chunk_bytes, Each&& each) noexcept {
  PieceCount count;
  for (BlockId id = start; id != end; id = heap.next(id)) {
    const HeapBlock block = heap.block(id);
    if (block.free) {
      count.live_before_free = std::min(count.live_before_free, count.live);
      continue;
    }
    ++count.live;
    count.bytes += block.bytes;
    each(block.tag);
    if (chunk_bytes != 0) {
      const std::uint64_t chunks = compactor::detail::chunk_count(block.bytes, chunk_bytes);
      count.chunks += chunks;
      if (count.live_before_free != SIZE_MAX) count.chunks_after_free += chunks;
    }
  }
  return count;
}

}  // namespace vramkit::pool_detail
