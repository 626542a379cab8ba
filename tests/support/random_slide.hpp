#pragma once
// Random slides for the chunk-plan tests: the moves plan_full makes, and more.
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "vramkit/compactor/chunk_plan.hpp"

namespace vramkit::test {

/// A random slide as plan_full makes them and more: blocks with random gaps, each moved to a random
/// place between the end of the previous destination and its own source (so displacements run from
/// zero, an in-place move, to far below the block: self-overlapping and disjoint alike), with the
/// odd zero-byte move between them. Offsets are multiples of 16.
inline std::vector<compactor::CopyRange> random_slide(std::mt19937_64& rng, std::size_t count, std::uint64_t largest) {
  std::vector<compactor::CopyRange> moves;
  std::uint64_t source = 16 * (rng() % 64);
  std::uint64_t destination_end = 0;
  for (std::size_t k = 0; k < count; ++k) {
    if (rng() % 16 == 0) {
      moves.push_back({source, destination_end, 0});
      continue;
    }
    const std::uint64_t bytes = 16 * (1 + rng() % (largest / 16));
    const std::uint64_t room = source - destination_end;  // how far down it may go
    // Packed against the previous one, nudged down a little, anywhere in between, or in place.
    const std::uint64_t choices[] = {destination_end,
                                     source - std::min<std::uint64_t>(room, 16 * (1 + rng() % 4)),
                                     destination_end + 16 * (rng() % (room / 16 + 1)), source};
    const std::uint64_t destination = choices[rng() % 4];
    moves.push_back({source, destination, bytes});
    destination_end = destination + bytes;
    source += bytes + 16 * (rng() % (rng() % 2 == 0 ? 4 : 4096));
  }
  return moves;
}

}  // namespace vramkit::test
