#pragma once
// Sliding a run of consecutive movable blocks down, against whatever lies below the run, so that
// the free space between them gathers above it: the way plan_hole opens a hole when no block can
// simply be moved into a hole elsewhere. Internal to the compactor.
#include <cstdint>
#include <optional>
#include <vector>

#include "vramkit/compactor/plan.hpp"

namespace vramkit::compactor::detail {

/// The blocks [first, last) of one segment's address-ordered blocks slide down; `offset` is where
/// the hole opens, above the last of them. `cost` is the bytes of the blocks that actually move.
struct SlideRun {
  std::uint64_t cost = 0;
  std::size_t first = 0;
  std::size_t last = 0;
  std::uint64_t offset = 0;
};

/// The cheapest run whose slide opens a hole of `bytes` at an offset aligned to `alignment`, among
/// those costing at most `max_cost`; nullopt if none. `blocks` are sorted by offset and disjoint
/// inside [0, capacity); fixed blocks bound runs.
/// Cost: O(n x run length); runs stop growing once they cost more than the best found.
std::optional<SlideRun> cheapest_slide(gsl::span<const LiveBlock> blocks, std::uint64_t capacity,
                                       std::uint64_t bytes, std::uint64_t alignment, std::uint64_t max_cost);

/// Where each block of `run` lands, in ascending order; a block that stays keeps its offset. The
/// moves that slide() describes go down only and are listed in ascending source order, as
/// plan_full's, so one ticket-ordered pass executes them (memmove semantics).
std::vector<std::uint64_t> slide_destinations(gsl::span<const LiveBlock> blocks, const SlideRun& run);

}  // namespace vramkit::compactor::detail
