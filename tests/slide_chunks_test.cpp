// The one-pass chunk plan of a slide (lib/compactor/slide_chunks.cpp) against the general path:
// the same plan for every slide, the general path for everything else, and byte-exact execution.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <iostream>
#include <random>

#include "compactor/chunk_plan_paths.hpp"
#include "support/first_difference.hpp"
#include "support/move_executor.hpp"
#include "support/random_slide.hpp"
#include "vramkit/compactor/chunk_plan.hpp"
#include "vramkit/units.hpp"

using namespace vramkit;
using namespace vramkit::compactor;
using vramkit::test::batch_memmove_reference;
using vramkit::test::execute_randomly;
using vramkit::test::random_slide;
using vramkit::test::test_seed;

namespace {

void require_same_plans(const ChunkPlan& a, const ChunkPlan& b) {
  REQUIRE(a.chunk_bytes == b.chunk_bytes);
  REQUIRE(a.total_bytes == b.total_bytes);
  REQUIRE(a.phase_begin == b.phase_begin);
  REQUIRE(a.chunks.size() == b.chunks.size());
  auto same = [](const Chunk& x, const Chunk& y) {
    return x.source == y.source && x.destination == y.destination && x.bytes == y.bytes && x.move == y.move &&
           x.wait_first == y.wait_first && x.wait_last == y.wait_last;
  };
  const auto differ = std::mismatch(a.chunks.begin(), a.chunks.end(), b.chunks.begin(), same);
  if (differ.first == a.chunks.end()) return;
  const Chunk& x = *differ.first;
  const Chunk& y = *differ.second;
  FAIL("chunk " << differ.first - a.chunks.begin() << ": source " << x.source << " / " << y.source
                << ", destination " << x.destination << " / " << y.destination << ", bytes " << x.bytes
                << " / " << y.bytes << ", move " << x.move << " / " << y.move << ", waits [" << x.wait_first
                << ", " << x.wait_last << "] / [" << y.wait_first << ", " << y.wait_last << "]");
}

}  // namespace

TEST_CASE("the one-pass slide plan equals the general plan on random slides", "[chunk_plan][slide]") {
  const std::uint64_t seed = test_seed(0x511de001);
  std::cout << "slide chunk plans: seed " << seed << "\n";
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  ChunkPlan reused;  // the pool's way: one plan object, planned into again and again
  for (int round = 0; round < 400; ++round) {
    INFO("round " << round);
    const std::uint32_t chunk_bytes = std::array<std::uint32_t, 5>{64, 256, 1000, 4096, 64 * 1024}[rng() % 5];
    const std::uint64_t largest = std::array<std::uint64_t, 3>{256, 8 * 1024, 300 * 1024}[rng() % 3];
    const auto moves = random_slide(rng, 1 + rng() % 64, largest);
    ChunkPlan slide;
    REQUIRE(detail::make_slide_chunk_plan(moves, chunk_bytes, slide));
    ChunkPlan general;
    detail::make_general_chunk_plan(moves, chunk_bytes, general);
    require_same_plans(slide, general);
    REQUIRE_NOTHROW(slide.validate());
    REQUIRE(slide.phases() <= 1);
    make_chunk_plan(moves, reused, chunk_bytes);
    require_same_plans(reused, general);

    // The planner's moves over two segments give the same plan as their device addresses.
    const std::uint64_t base = 1_MiB * (1 + rng() % 8);
    const std::vector<std::uint64_t> bases = {base + 64_GiB, base};
    std::vector<Move> planner_moves;
    for (const CopyRange& move : moves)
      planner_moves.push_back({.tag = 0,
                               .from_segment = 1,
                               .from_offset = move.source,
                               .to_segment = 1,
                               .to_offset = move.destination,
                               .bytes = move.bytes});
    std::vector<CopyRange> absolute = moves;
    for (CopyRange& move : absolute) move.source += base, move.destination += base;
    ChunkPlan from_moves;
    make_chunk_plan(planner_moves, bases, from_moves, chunk_bytes);
    require_same_plans(from_moves, make_chunk_plan(absolute, chunk_bytes));
  }
}

TEST_CASE("random slides planned in one pass execute with memmove semantics", "[chunk_plan][slide]") {
  const std::uint64_t seed = test_seed(0x511de002);
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 60; ++round) {
    INFO("round " << round);
    const auto moves = random_slide(rng, 1 + rng() % 24, 4096);
    std::uint64_t memory_bytes = 0;
    for (const CopyRange& move : moves) memory_bytes = std::max(memory_bytes, move.source + move.bytes);
    const std::uint32_t chunk_bytes = std::array<std::uint32_t, 3>{64, 512, 1008}[rng() % 3];
    ChunkPlan plan;
    REQUIRE(detail::make_slide_chunk_plan(moves, chunk_bytes, plan));
    std::vector<std::uint8_t> before(memory_bytes);
    for (auto& byte : before) byte = static_cast<std::uint8_t>(rng());
    const auto expected = batch_memmove_reference(before, moves);
    for (int order = 0; order < 3; ++order) {
      auto memory = before;
      execute_randomly(plan, memory, rng);
      REQUIRE(vramkit_test::first_difference(memory, expected) == vramkit_test::no_difference);
    }
  }
}

TEST_CASE("moves that are not a slide go to the general path", "[chunk_plan][slide]") {
  ChunkPlan plan;
  // Moving up, sources out of order, a destination below the previous one (a block filling a gap
  // before a fixed block), overlapping sources, overlapping destinations.
  const std::vector<std::vector<CopyRange>> not_slides = {
      {{0, 4096, 1024}},
      {{8192, 0, 1024}, {4096, 2048, 1024}},
      {{4096, 2048, 1024}, {8192, 0, 1024}},
      {{4096, 0, 2048}, {5120, 3072, 1024}},
      {{4096, 0, 2048}, {8192, 1024, 1024}},
  };
  for (const auto& moves : not_slides) REQUIRE_FALSE(detail::make_slide_chunk_plan(moves, 512, plan));
  // make_chunk_plan still plans the first three and rejects the overlaps, as before.
  for (std::size_t k = 0; k < 3; ++k)
    REQUIRE_NOTHROW(make_chunk_plan(not_slides[k], plan, 512), plan.validate());
  REQUIRE_THROWS_WITH(make_chunk_plan(not_slides[3], plan, 512), Catch::Contains("overlapping source"));
  REQUIRE_THROWS_WITH(make_chunk_plan(not_slides[4], plan, 512), Catch::Contains("overlapping destination"));
  // Zero-byte and in-place moves are skipped wherever they sit: still a slide.
  const std::vector<CopyRange> with_skips = {{4096, 4096, 1024}, {100, 99999, 0}, {8192, 1024, 1024}};
  REQUIRE(detail::make_slide_chunk_plan(with_skips, 512, plan));
  REQUIRE(plan.chunks.size() == 2);
  REQUIRE(plan.chunks[0].move == 2);
}

TEST_CASE("a plan object planned into again holds exactly the new plan", "[chunk_plan][slide]") {
  ChunkPlan plan;
  const std::vector<CopyRange> slide = {{4096, 0, 64_KiB}, {128_KiB, 64_KiB + 512, 8192}};
  const std::vector<CopyRange> phases = {{0, 512, 1024}, {1024, 1536, 1024}, {2048, 8192, 1024}};
  const std::vector<CopyRange> nothing = {{64, 64, 64}};
  for (const auto* moves : {&slide, &phases, &nothing, &slide, &phases}) {
    make_chunk_plan(*moves, plan, 1024);
    require_same_plans(plan, make_chunk_plan(*moves, 1024));
    REQUIRE_NOTHROW(plan.validate());
  }
}
