// The chunks the CUDA device derives on the GPU from a slide's moves (compactor/slide_math.hpp),
// computed here on the host: chunk for chunk the plan that make_chunk_plan builds.
#include <catch2/catch.hpp>

#include <array>
#include <iostream>
#include <random>

#include "compactor/chunk_plan_paths.hpp"
#include "support/move_executor.hpp"
#include "support/random_slide.hpp"
#include "vramkit/compactor/chunk_plan.hpp"
#include "vramkit/units.hpp"

using namespace vramkit;
using namespace vramkit::compactor;
using vramkit::test::random_slide;
using vramkit::test::test_seed;

namespace {

std::vector<Move> as_planner_moves(const std::vector<CopyRange>& ranges, std::uint64_t base) {
  std::vector<Move> moves;
  for (const CopyRange& range : ranges) {
    moves.push_back({.tag = 0,
                     .from_segment = 0,
                     .from_offset = range.source - base,
                     .to_segment = 0,
                     .to_offset = range.destination - base,
                     .bytes = range.bytes});
  }
  return moves;
}

}  // namespace

TEST_CASE("a slide's chunks derived one at a time from its moves equal the host's chunk plan",
          "[chunk_plan][slide]") {
  const std::uint64_t seed = test_seed(0x511de101);
  std::cout << "slide math: seed " << seed << "\n";
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  std::size_t compared = 0, with_waits = 0;
  for (int round = 0; round < 400; ++round) {
    INFO("round " << round);
    const std::uint32_t chunk_bytes = std::array<std::uint32_t, 4>{64, 1000, 4096, 64 * 1024}[rng() % 4];
    const std::uint64_t largest = std::array<std::uint64_t, 3>{256, 8 * 1024, 300 * 1024}[rng() % 3];
    const std::uint64_t base = 2_MiB * (1 + rng() % 4);
    auto ranges = random_slide(rng, 1 + rng() % 80, largest);
    for (CopyRange& range : ranges) range.source += base, range.destination += base;
    const std::vector<Move> moves = as_planner_moves(ranges, base);
    const std::vector<std::uint64_t> bases = {base};

    ChunkPlan plan;
    make_chunk_plan(moves, bases, plan, chunk_bytes);
    std::vector<detail::SlideMove> slide(moves.size());
    std::size_t count = 0;
    std::uint64_t total = 0, bytes = 0;
    // Half the rounds stage with another chunk size and chunk again, as the CUDA device does when
    // its choice of kernel, made from the bytes the staging counts, is the block form.
    const bool rechunk = rng() % 2 == 0;
    REQUIRE(detail::make_slide_moves(moves, bases, rechunk ? 8192 : chunk_bytes, slide.data(), count, total, bytes));
    if (rechunk) total = detail::rechunk_slide_moves(slide.data(), count, chunk_bytes);
    std::uint64_t moved = 0;
    for (const Move& move : moves) moved += move.bytes;
    REQUIRE(bytes == moved);
    REQUIRE(total == plan.chunks.size());
    for (std::uint32_t ticket = 0; ticket < total; ++ticket) {
      const detail::SlideChunk derived =
          detail::slide_chunk(slide.data(), static_cast<std::uint32_t>(count), static_cast<std::uint32_t>(total),
                              chunk_bytes, ticket);
      const Chunk& expected = plan.chunks[ticket];
      INFO("ticket " << ticket);
      REQUIRE(derived.source == expected.source);
      REQUIRE(derived.destination == expected.destination);
      REQUIRE(derived.bytes == expected.bytes);
      REQUIRE(derived.move == expected.move);
      REQUIRE(derived.wait_first == expected.wait_first);
      REQUIRE(derived.wait_last == expected.wait_last);
      ++compared;
      with_waits += expected.wait_first != no_wait;
    }
  }
  CHECK(compared > 1000);
  CHECK(with_waits > 100);  // the random slides do overlap
}

TEST_CASE("moves that are not a slide are refused by make_slide_moves", "[chunk_plan][slide]") {
  std::vector<detail::SlideMove> out(2);
  std::size_t count = 0;
  std::uint64_t total = 0, bytes = 0;
  const std::vector<std::uint64_t> bases = {0};
  auto move = [](std::uint64_t from, std::uint64_t to, std::uint64_t bytes) {
    return Move{.tag = 0, .from_segment = 0, .from_offset = from, .to_segment = 0, .to_offset = to, .bytes = bytes};
  };
  const std::vector<Move> up = {move(0, 4096, 256)};
  CHECK_FALSE(detail::make_slide_moves(up, bases, 1024, out.data(), count, total, bytes));
  const std::vector<Move> crossing = {move(8192, 0, 256), move(4096, 1024, 256)};  // sources descend
  CHECK_FALSE(detail::make_slide_moves(crossing, bases, 1024, out.data(), count, total, bytes));
  const std::vector<Move> down = {move(4096, 0, 2048), move(8192, 2048, 3000)};
  REQUIRE(detail::make_slide_moves(down, bases, 1024, out.data(), count, total, bytes));
  CHECK(count == 2);
  CHECK(total == 2 + 3);
  CHECK(out[1].first_chunk == 2);
  CHECK(bytes == 2048 + 3000);
  CHECK(detail::rechunk_slide_moves(out.data(), count, 4096) == 1 + 1);
  CHECK(out[1].first_chunk == 1);
}
