// Compaction planning (DESIGN.md, "Relocation rules"): pure host code, no device memory is touched.
//
// Every plan here keeps memmove semantics executable in one pass: plan_full only moves blocks down
// into space that lower blocks vacated or that was free, so a prefix of its moves is a plan and the
// ticket order of chunk_plan needs a single phase; plan_evacuation only writes into space that was
// free before the plan, so its moves are independent of each other. plan_hole is in hole_plan.cpp.
#include "vramkit/compactor/plan.hpp"

#include <algorithm>
#include <numeric>

#include <gsl/assert>
#include <gsl/narrow>

#include "compactor/free_holes.hpp"

namespace vramkit::compactor {
namespace {

using detail::align_up;

std::uint64_t alignment_of(const LiveBlock& block) {
  return std::max<std::uint64_t>(block.alignment, 1);
}

/// Blocks of one or more segments in the order they are placed: largest first (ties by address),
/// so that the hard-to-place blocks see the most holes.
struct PendingBlock {
  std::uint32_t segment = 0;
  const LiveBlock* block = nullptr;
};

/// Best fit, largest first. Cost: O(b log b + b log h) for b blocks and h holes.
std::optional<std::vector<Move>> place_blocks(std::vector<PendingBlock> pending, detail::FreeHoles& holes) {
  std::sort(pending.begin(), pending.end(), [](const PendingBlock& a, const PendingBlock& b) {
    if (a.block->bytes != b.block->bytes) return a.block->bytes > b.block->bytes;
    return std::tie(a.segment, a.block->offset) < std::tie(b.segment, b.block->offset);
  });
  std::vector<Move> moves;
  moves.reserve(pending.size());
  for (const PendingBlock& item : pending) {
    const auto placement = holes.take(item.block->bytes, alignment_of(*item.block));
    if (!placement) return std::nullopt;
    moves.push_back(Move{.tag = item.block->tag,
                         .from_segment = item.segment,
                         .from_offset = item.block->offset,
                         .to_segment = placement->segment,
                         .to_offset = placement->offset,
                         .bytes = item.block->bytes});
  }
  return moves;
}

}  // namespace

std::uint64_t bytes_moved(gsl::span<const Move> moves) {
  return std::accumulate(moves.begin(), moves.end(), std::uint64_t{0},
                         [](std::uint64_t sum, const Move& move) { return sum + move.bytes; });
}

// The gaps before fixed blocks are kept in address order; each movable block scans them (first
// fit), which is where O(n x pinned blocks) comes from. Alignment padding in front of a placed
// block is left unused: it is smaller than the block's alignment.
std::vector<Move> plan_full(const SegmentLayout& segment, std::uint64_t max_bytes_moved) {
  std::vector<Move> moves;
  plan_full(segment, max_bytes_moved, moves);
  return moves;
}

void plan_full(const SegmentLayout& segment, std::uint64_t max_bytes_moved, std::vector<Move>& moves) {
  FullPlanner planner(segment.segment, max_bytes_moved);
  planner.add(segment.blocks, moves);
}

void FullPlanner::add(gsl::span<const LiveBlock> blocks, std::vector<Move>& moves) {
  if (stopped_) return;
  if (moves.capacity() - moves.size() < blocks.size())
    moves.reserve(std::max(moves.size() + blocks.size(), 2 * moves.capacity()));
  for (const LiveBlock& block : blocks) {
    Expects(cursor_ <= block.offset);
    if (!block.movable) {
      if (cursor_ < block.offset) gaps_.push_back({cursor_, block.offset});
      cursor_ = block.offset + block.bytes;
      continue;
    }
    const std::uint64_t alignment = alignment_of(block);
    auto gap = std::find_if(gaps_.begin(), gaps_.end(), [&](const Gap& candidate) {
      return align_up(candidate.begin, alignment) + block.bytes <= candidate.end;
    });
    std::uint64_t destination = 0;
    if (gap != gaps_.end()) {
      destination = align_up(gap->begin, alignment);
      gap->begin = destination + block.bytes;
      if (gap->begin == gap->end) gaps_.erase(gap);
    } else {
      // min(): a source that breaks its own alignment stays rather than moving up.
      destination = std::min(align_up(cursor_, alignment), block.offset);
      cursor_ = destination + block.bytes;
    }
    if (destination == block.offset) continue;
    if (block.bytes > max_bytes_ - bytes_moved_) {  // the plan so far is a valid prefix
      stopped_ = true;
      return;
    }
    bytes_moved_ += block.bytes;
    moves.push_back(Move{.tag = block.tag,
                         .from_segment = segment_,
                         .from_offset = block.offset,
                         .to_segment = segment_,
                         .to_offset = destination,
                         .bytes = block.bytes});
  }
  Ensures(bytes_moved_ <= max_bytes_);
}

std::optional<std::vector<Move>> plan_evacuation(gsl::span<const SegmentLayout> segments,
                                                 std::size_t victim) {
  Expects(victim < segments.size());
  const SegmentLayout& emptied = segments[victim];
  std::vector<PendingBlock> pending;
  pending.reserve(emptied.blocks.size());
  for (const LiveBlock& block : emptied.blocks) {
    if (!block.movable) return std::nullopt;
    pending.push_back({emptied.segment, &block});
  }
  detail::FreeHoles holes;
  for (std::size_t index = 0; index < segments.size(); ++index)
    if (index != victim) holes.add_gaps(segments[index]);
  return place_blocks(std::move(pending), holes);
}

}  // namespace vramkit::compactor
