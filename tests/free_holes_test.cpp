// FreeHoles (lib/compactor/free_holes.hpp): best fit, merging on release, cutting, and rolling back
// to a mark, which plan_hole relies on to try one window after another over the same holes.
#include <catch2/catch.hpp>

#include <iostream>
#include <random>

#include "compactor/free_holes.hpp"
#include "support/move_executor.hpp"

using vramkit::compactor::detail::FreeHoles;
using Holes = std::vector<std::tuple<std::uint32_t, std::uint64_t, std::uint64_t>>;

TEST_CASE("FreeHoles::take is best fit at the alignment and keeps the leftovers", "[plan][holes]") {
  FreeHoles holes;
  holes.add(0, 0, 4096);
  holes.add(0, 5120, 6400);  // 1280 B
  holes.add(1, 256, 1536);   // 1280 B, unaligned for 1 KiB
  const auto placed = holes.take(1024, 1024);
  REQUIRE(placed);
  CHECK(placed->segment == 0);  // segment 1's hole is as small but has no 1 KiB-aligned room
  CHECK(placed->offset == 5120);
  CHECK(holes.in_address_order() == Holes{{0, 0, 4096}, {0, 6144, 6400}, {1, 256, 1536}});
  const auto padded = holes.take(512, 1024);  // the smallest with room: [256, 1536) at 1024
  REQUIRE(padded);
  CHECK(padded->segment == 1);
  CHECK(padded->offset == 1024);
  CHECK(holes.in_address_order() == Holes{{0, 0, 4096}, {0, 6144, 6400}, {1, 256, 1024}});
  CHECK_FALSE(holes.take(8192, 256));
}

TEST_CASE("FreeHoles::release merges with the holes before and after, within one segment", "[plan][holes]") {
  FreeHoles holes;
  holes.add(0, 0, 1024);
  holes.add(0, 2048, 3072);
  holes.add(1, 3072, 4096);  // touches [2048, 3072) by address, but in another segment
  holes.release(0, 1024, 2048);
  CHECK(holes.in_address_order() == Holes{{0, 0, 3072}, {1, 3072, 4096}});
  holes.release(0, 3072, 3328);
  CHECK(holes.in_address_order() == Holes{{0, 0, 3328}, {1, 3072, 4096}});
  const auto placed = holes.take(3328, 256);  // the merged hole is one hole for best fit too
  REQUIRE(placed);
  CHECK(placed->offset == 0);
  CHECK(holes.in_address_order() == Holes{{1, 3072, 4096}});
}

TEST_CASE("FreeHoles::cut removes a range from every hole it overlaps and keeps the rest", "[plan][holes]") {
  FreeHoles holes;
  holes.add(0, 0, 1024);
  holes.add(0, 1536, 2048);
  holes.add(0, 3072, 4096);
  holes.add(1, 0, 4096);
  holes.cut(0, 512, 3328);
  CHECK(holes.in_address_order() == Holes{{0, 0, 512}, {0, 3328, 4096}, {1, 0, 4096}});
  holes.cut(1, 1024, 2048);
  CHECK(holes.in_address_order() == Holes{{0, 0, 512}, {0, 3328, 4096}, {1, 0, 1024}, {1, 2048, 4096}});
  holes.cut(0, 4096, 8192);  // nothing there
  CHECK(holes.size() == 4);
}

TEST_CASE("FreeHoles::rollback undoes every change since a mark, in any mix", "[plan][holes]") {
  const std::uint64_t seed = vramkit::test::test_seed(0xF0110008);
  std::cout << "FreeHoles rollback: seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 50; ++round) {
    INFO("seed " << seed << ", round " << round);
    FreeHoles holes;
    for (std::uint64_t begin = 0; begin < 64 * 1024; begin += 1024 * (1 + rng() % 4))
      holes.add(static_cast<std::uint32_t>(rng() % 2), begin, begin + 256 * (1 + rng() % 3));
    const Holes before = holes.in_address_order();
    const std::size_t mark = holes.mark();
    for (int step = 0; step < 20; ++step) {
      const std::uint32_t segment = static_cast<std::uint32_t>(rng() % 2);
      const std::uint64_t begin = 256 * (rng() % 256);
      switch (rng() % 3) {
        case 0:
          holes.take(256 * (1 + rng() % 4), std::uint64_t{256} << (rng() % 3));
          break;
        case 1:
          holes.cut(segment, begin, begin + 256 * (1 + rng() % 16));
          break;
        default: {  // release a range that is free of holes: cut it first
          const std::uint64_t end = begin + 256 * (1 + rng() % 4);
          holes.cut(segment, begin, end);
          holes.release(segment, begin, end);
        }
      }
    }
    holes.rollback(mark);
    REQUIRE(holes.in_address_order() == before);
    REQUIRE(holes.mark() == mark);
  }
}
