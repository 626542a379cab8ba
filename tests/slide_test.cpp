// Runs of blocks sliding down (lib/compactor/slide.hpp): the cheapest run that opens a hole, against
// trying every run.
#include <catch2/catch.hpp>

#include <iostream>
#include <optional>
#include <random>

#include "compactor/slide.hpp"
#include "support/plan_layouts.hpp"

using namespace vramkit;
using namespace vramkit::compactor;
using vramkit::test::block;
using vramkit::test::OwnedSegment;
using vramkit::test::random_segment;

namespace {

/// Slides every run [first, last) of movable blocks down and keeps the cheapest that opens `bytes`
/// at `alignment` above it (same placement rule as slide.cpp: aligned, never up).
std::optional<std::uint64_t> brute_force_slide_cost(const OwnedSegment& segment, std::uint64_t bytes,
                                                    std::uint64_t alignment) {
  const auto& blocks = segment.blocks;
  std::optional<std::uint64_t> best;
  for (std::size_t first = 0; first < blocks.size(); ++first) {
    std::uint64_t cursor = first == 0 ? 0 : blocks[first - 1].offset + blocks[first - 1].bytes;
    std::uint64_t cost = 0;
    for (std::size_t last = first; last < blocks.size() && blocks[last].movable; ++last) {
      const std::uint64_t destination =
          std::min(vramkit::test::round_up(cursor, std::max<std::uint64_t>(blocks[last].alignment, 1)),
                   blocks[last].offset);
      if (destination != blocks[last].offset) cost += blocks[last].bytes;
      cursor = destination + blocks[last].bytes;
      const std::uint64_t next = last + 1 < blocks.size() ? blocks[last + 1].offset : segment.capacity;
      if (vramkit::test::round_up(cursor, alignment) + bytes <= next && (!best || cost < *best)) best = cost;
    }
  }
  return best;
}

}  // namespace

TEST_CASE("cheapest_slide finds the cheapest run that opens the hole, as trying every run does",
          "[plan][slide]") {
  const std::uint64_t seed = vramkit::test::test_seed(0xF0110009);
  std::cout << "cheapest_slide: seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  int found = 0;
  for (int round = 0; round < 300; ++round) {
    INFO("seed " << seed << ", round " << round);
    const OwnedSegment segment = random_segment(rng, {.capacity = 32_KiB,
                                                      .max_bytes = 4_KiB,
                                                      .free_fraction = 0.1 + 0.1 * double(rng() % 3),
                                                      .fixed_fraction = 0.1,
                                                      .alignments = {256, 256, 1024}});
    const std::uint64_t alignment = std::uint64_t{256} << (rng() % 2);
    const std::uint64_t bytes = 256 * (1 + rng() % 24);
    const std::uint64_t max_cost = rng() % 2 == 0 ? UINT64_MAX : 256 * (rng() % 64);
    auto expected = brute_force_slide_cost(segment, bytes, alignment);
    if (expected && *expected > max_cost) expected.reset();
    const auto run = detail::cheapest_slide(segment.blocks, segment.capacity, bytes, alignment, max_cost);
    REQUIRE(run.has_value() == expected.has_value());
    if (!run) continue;
    ++found;
    REQUIRE(run->cost == *expected);
    // The run's destinations: down only, in order, and the hole above them is free up to the next block.
    const auto destinations = detail::slide_destinations(segment.blocks, *run);
    std::uint64_t cost = 0;
    for (std::size_t index = run->first; index < run->last; ++index) {
      const LiveBlock& moved = segment.blocks[index];
      const std::uint64_t destination = destinations[index - run->first];
      REQUIRE(destination <= moved.offset);
      REQUIRE(destination % std::max<std::uint64_t>(moved.alignment, 1) == 0);
      if (destination != moved.offset) cost += moved.bytes;
    }
    REQUIRE(cost == run->cost);
    REQUIRE(run->offset % alignment == 0);
    REQUIRE(run->offset >= destinations.back() + segment.blocks[run->last - 1].bytes);
    const std::uint64_t next =
        run->last < segment.blocks.size() ? segment.blocks[run->last].offset : segment.capacity;
    REQUIRE(run->offset + bytes <= next);
  }
  REQUIRE(found > 100);
}

TEST_CASE("cheapest_slide gathers free space only between fixed blocks", "[plan][slide]") {
  const OwnedSegment segment{
      .segment = 0,
      .capacity = 8_KiB,
      .granularity = 256,
      .blocks = {block(1_KiB, 1_KiB, 1), block(3_KiB, 1_KiB, 2, false), block(5_KiB, 1_KiB, 3)}};
  // 2 KiB: block 1 slides down to 0 and opens [1K, 3K) (block 3 sliding costs as much; the lower
  // run wins the tie). A run always moves its first block: free holes are plan_hole's windows.
  const auto run = detail::cheapest_slide(segment.blocks, segment.capacity, 2_KiB, 256, UINT64_MAX);
  REQUIRE(run);
  CHECK(run->cost == 1_KiB);
  CHECK(run->offset == 1_KiB);
  // 3 KiB: below fixed block 2 there is only 2 KiB to gather; block 3 slides to 4K, opening [5K, 8K).
  const auto larger = detail::cheapest_slide(segment.blocks, segment.capacity, 3_KiB, 256, UINT64_MAX);
  REQUIRE(larger);
  CHECK(larger->cost == 1_KiB);
  CHECK(larger->offset == 5_KiB);
  CHECK_FALSE(detail::cheapest_slide(segment.blocks, segment.capacity, 4_KiB + 256, 256, UINT64_MAX));
}
