// Compaction planning (DESIGN.md, "Relocation rules"): pure host code, no device memory is touched.
//
// Every plan here keeps memmove semantics executable in one pass: plan_full only moves blocks down
// into space that lower blocks vacated or that was free, so a prefix of its moves is a plan and the
// ticket order of chunk_plan needs a single phase; plan_hole and plan_evacuation only write into
// space that was free before the plan, so their moves are independent of each other, except
// plan_hole's fallback (plan_slide), whose moves slide down like plan_full's.
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

/// A window [offset, offset + bytes) of one segment that holds no fixed block; it overlaps the
/// blocks [first, last) of that segment, whose movable bytes are `cost`.
struct Window {
  std::uint64_t cost = 0;
  std::size_t layout = 0;
  std::uint64_t offset = 0;
  std::size_t first = 0;
  std::size_t last = 0;
};

/// Appends the windows of one segment. Only starts at a block's start or a gap's start (rounded
/// up to the alignment) need checking: sliding any window down to the start of the block or gap
/// it begins in adds no block at its low end and can only drop blocks at its high end.
/// Two pointers over the address-ordered blocks. Cost: O(n).
void collect_windows(const SegmentLayout& layout, std::size_t layout_index, std::uint64_t bytes,
                     std::uint64_t alignment, std::uint64_t max_bytes_moved, std::vector<Window>& windows) {
  if (bytes > layout.capacity) return;
  const auto blocks = layout.blocks;
  std::size_t first = 0;  // first block that ends after the window's start
  std::size_t last = 0;   // first block that starts at or after the window's end
  std::uint64_t movable_bytes = 0;
  std::size_t fixed_blocks = 0;
  std::uint64_t previous_start = UINT64_MAX;
  auto consider = [&](std::uint64_t start) {
    if (start == previous_start || start > layout.capacity - bytes) return;
    previous_start = start;
    const std::uint64_t end = start + bytes;
    for (; last < blocks.size() && blocks[last].offset < end; ++last) {
      if (blocks[last].movable)
        movable_bytes += blocks[last].bytes;
      else
        ++fixed_blocks;
    }
    for (; first < last && blocks[first].offset + blocks[first].bytes <= start; ++first) {
      if (blocks[first].movable)
        movable_bytes -= blocks[first].bytes;
      else
        --fixed_blocks;
    }
    if (fixed_blocks != 0 || movable_bytes > max_bytes_moved) return;
    // Windows that overlap the same blocks cost the same; the lowest stands for them all.
    if (!windows.empty() && windows.back().layout == layout_index && windows.back().first == first &&
        windows.back().last == last)
      return;
    windows.push_back({movable_bytes, layout_index, start, first, last});
  };
  consider(0);
  for (const LiveBlock& block : blocks) {
    consider(align_up(block.offset, alignment));
    consider(align_up(block.offset + block.bytes, alignment));
  }
}

/// The fallback of plan_hole when no window's blocks fit in the holes outside it (free space left
/// only in pieces smaller than those blocks, as near a pool's full capacity): slide a run of
/// consecutive movable blocks down against whatever lies below the run, so that the free space
/// between them gathers above it. The cheapest run wins. Its moves go down only and are listed in
/// ascending source order, as plan_full's, so one ticket-ordered pass executes them (memmove
/// semantics). Cost: O(n x run length); runs stop growing once they cost more than the best found.
std::optional<HolePlan> plan_slide(gsl::span<const SegmentLayout> segments, std::uint64_t bytes,
                                   std::uint64_t alignment, std::uint64_t max_bytes_moved) {
  struct Run {
    std::uint64_t cost = UINT64_MAX;
    std::size_t layout = 0;
    std::size_t first = 0;
    std::size_t last = 0;
  } best;
  for (std::size_t layout_index = 0; layout_index < segments.size(); ++layout_index) {
    const SegmentLayout& layout = segments[layout_index];
    const auto blocks = layout.blocks;
    for (std::size_t first = 0; first < blocks.size(); ++first) {
      if (!blocks[first].movable) continue;
      std::uint64_t cursor = first == 0 ? 0 : blocks[first - 1].offset + blocks[first - 1].bytes;
      std::uint64_t cost = 0;
      for (std::size_t last = first; last < blocks.size() && blocks[last].movable; ++last) {
        const LiveBlock& block = blocks[last];
        const std::uint64_t destination = std::min(align_up(cursor, alignment_of(block)), block.offset);
        if (destination != block.offset) cost += block.bytes;
        if (cost > max_bytes_moved || cost >= best.cost) break;
        cursor = destination + block.bytes;
        const std::uint64_t next = last + 1 < blocks.size() ? blocks[last + 1].offset : layout.capacity;
        if (align_up(cursor, alignment) + bytes <= next) {
          best = {cost, layout_index, first, last + 1};
          break;
        }
      }
    }
  }
  if (best.cost == UINT64_MAX) return std::nullopt;
  const SegmentLayout& home = segments[best.layout];
  HolePlan plan{.segment = home.segment, .offset = 0, .moves = {}};
  std::uint64_t cursor =
      best.first == 0 ? 0 : home.blocks[best.first - 1].offset + home.blocks[best.first - 1].bytes;
  for (std::size_t index = best.first; index < best.last; ++index) {
    const LiveBlock& block = home.blocks[index];
    const std::uint64_t destination = std::min(align_up(cursor, alignment_of(block)), block.offset);
    if (destination != block.offset) {
      plan.moves.push_back(Move{.tag = block.tag,
                                .from_segment = home.segment,
                                .from_offset = block.offset,
                                .to_segment = home.segment,
                                .to_offset = destination,
                                .bytes = block.bytes});
    }
    cursor = destination + block.bytes;
  }
  plan.offset = align_up(cursor, alignment);
  Ensures(bytes_moved(plan.moves) == best.cost);
  return plan;
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
  struct Gap {
    std::uint64_t begin = 0;
    std::uint64_t end = 0;
  };
  std::vector<Gap> gaps;
  if (moves.capacity() - moves.size() < segment.blocks.size())
    moves.reserve(std::max(moves.size() + segment.blocks.size(), 2 * moves.capacity()));
  std::uint64_t cursor = 0;  // everything below is placed (or a gap listed above)
  std::uint64_t budget_used = 0;
  for (const LiveBlock& block : segment.blocks) {
    Expects(cursor <= block.offset);
    if (!block.movable) {
      if (cursor < block.offset) gaps.push_back({cursor, block.offset});
      cursor = block.offset + block.bytes;
      continue;
    }
    const std::uint64_t alignment = alignment_of(block);
    auto gap = std::find_if(gaps.begin(), gaps.end(), [&](const Gap& candidate) {
      return align_up(candidate.begin, alignment) + block.bytes <= candidate.end;
    });
    std::uint64_t destination = 0;
    if (gap != gaps.end()) {
      destination = align_up(gap->begin, alignment);
      gap->begin = destination + block.bytes;
      if (gap->begin == gap->end) gaps.erase(gap);
    } else {
      // min(): a source that breaks its own alignment stays rather than moving up.
      destination = std::min(align_up(cursor, alignment), block.offset);
      cursor = destination + block.bytes;
    }
    if (destination == block.offset) continue;
    if (block.bytes > max_bytes_moved - budget_used) break;  // the plan so far is a valid prefix
    budget_used += block.bytes;
    moves.push_back(Move{.tag = block.tag,
                         .from_segment = segment.segment,
                         .from_offset = block.offset,
                         .to_segment = segment.segment,
                         .to_offset = destination,
                         .bytes = block.bytes});
  }
  Ensures(budget_used <= max_bytes_moved);
}

// Candidate windows are ranked by (moved bytes, blocks moved, segment, offset); only the cheapest
// few are tried, because a window whose blocks cannot be placed mostly means that free space
// outside it is short, which the next windows rarely change. Then plan_slide, which needs no
// outside holes, only free bytes next to a run of movable blocks.
std::optional<HolePlan> plan_hole(gsl::span<const SegmentLayout> segments, std::uint64_t bytes,
                                  std::uint64_t alignment, std::uint64_t max_bytes_moved) {
  Expects(alignment != 0 && (alignment & (alignment - 1)) == 0);
  if (bytes == 0) bytes = 1;  // an empty request still needs an aligned place to point at
  std::vector<Window> windows;
  for (std::size_t index = 0; index < segments.size(); ++index)
    collect_windows(segments[index], index, bytes, alignment, max_bytes_moved, windows);

  constexpr std::size_t windows_tried = 8;
  const std::size_t tried = std::min(windows.size(), windows_tried);
  std::partial_sort(windows.begin(), windows.begin() + static_cast<std::ptrdiff_t>(tried), windows.end(),
                    [](const Window& a, const Window& b) {
                      return std::tuple(a.cost, a.last - a.first, a.layout, a.offset) <
                             std::tuple(b.cost, b.last - b.first, b.layout, b.offset);
                    });
  for (std::size_t rank = 0; rank < tried; ++rank) {
    const Window& window = windows[rank];
    const SegmentLayout& home = segments[window.layout];
    HolePlan plan{.segment = home.segment, .offset = window.offset, .moves = {}};
    if (window.cost == 0) return plan;
    detail::FreeHoles holes;
    for (std::size_t index = 0; index < segments.size(); ++index) {
      if (index == window.layout)
        holes.add_gaps(segments[index], window.offset, window.offset + bytes);
      else
        holes.add_gaps(segments[index]);
    }
    std::vector<PendingBlock> pending;
    for (std::size_t block = window.first; block < window.last; ++block)
      pending.push_back({home.segment, &home.blocks[block]});
    if (auto moves = place_blocks(std::move(pending), holes)) {
      plan.moves = std::move(*moves);
      Ensures(bytes_moved(plan.moves) == window.cost);
      return plan;
    }
  }
  return plan_slide(segments, bytes, alignment, max_bytes_moved);
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
