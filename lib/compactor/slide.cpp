// Runs of blocks sliding down (see slide.hpp).
#include "compactor/slide.hpp"

#include <algorithm>

#include "compactor/free_holes.hpp"

namespace vramkit::compactor::detail {
namespace {

std::uint64_t alignment_of(const LiveBlock& block) {
  return std::max<std::uint64_t>(block.alignment, 1);
}

/// min(): a source that breaks its own alignment stays rather than moving up.
std::uint64_t slide_destination(const LiveBlock& block, std::uint64_t cursor) {
  return std::min(align_up(cursor, alignment_of(block)), block.offset);
}

std::uint64_t end_of(const LiveBlock& block) {
  return block.offset + block.bytes;
}

std::uint64_t end_before(gsl::span<const LiveBlock> blocks, std::size_t first) {
  return first == 0 ? 0 : blocks[first - 1].offset + blocks[first - 1].bytes;
}

}  // namespace

std::optional<SlideRun> cheapest_slide(gsl::span<const LiveBlock> blocks, std::uint64_t capacity,
                                       std::uint64_t bytes, std::uint64_t alignment, std::uint64_t max_cost) {
  std::optional<SlideRun> best;
  for (std::size_t first = 0; first < blocks.size(); ++first) {
    if (!blocks[first].movable) continue;
    std::uint64_t cursor = end_before(blocks, first);
    // A run whose first block stays is the run after it, which the next start tries (unless the
    // hole is already above that block).
    if (slide_destination(blocks[first], cursor) == blocks[first].offset && first + 1 < blocks.size() &&
        blocks[first + 1].movable &&
        align_up(end_of(blocks[first]), alignment) + bytes > blocks[first + 1].offset)
      continue;
    std::uint64_t cost = 0;
    for (std::size_t last = first; last < blocks.size() && blocks[last].movable; ++last) {
      const LiveBlock& block = blocks[last];
      const std::uint64_t destination = slide_destination(block, cursor);
      if (destination != block.offset) cost += block.bytes;
      if (cost > max_cost || (best && cost >= best->cost)) break;
      cursor = destination + block.bytes;
      const std::uint64_t next = last + 1 < blocks.size() ? blocks[last + 1].offset : capacity;
      const std::uint64_t offset = align_up(cursor, alignment);
      if (offset + bytes <= next) {
        best = SlideRun{cost, first, last + 1, offset};
        break;
      }
    }
  }
  return best;
}

std::vector<std::uint64_t> slide_destinations(gsl::span<const LiveBlock> blocks, const SlideRun& run) {
  std::vector<std::uint64_t> destinations;
  destinations.reserve(run.last - run.first);
  std::uint64_t cursor = end_before(blocks, run.first);
  for (std::size_t index = run.first; index < run.last; ++index) {
    destinations.push_back(slide_destination(blocks[index], cursor));
    cursor = destinations.back() + blocks[index].bytes;
  }
  return destinations;
}

}  // namespace vramkit::compactor::detail
