#pragma once
// Internal to the pool: where a full compaction's slide puts a run of a segment's live blocks
// (Pool::plan_slide, Pool::write_slide). Each block slides to the sum of the live bytes before it.
#include <cstddef>
#include <cstdint>

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

}  // namespace vramkit::pool_detail
