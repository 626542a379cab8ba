// Compaction planning: full compaction and evacuation (minimal holes: hole_plan_test.cpp). Every
// plan is checked in an address model and, where the sizes allow, by moving real bytes (in order,
// and as a chunk plan executed in random orders).
#include <catch2/catch.hpp>

#include <cmath>
#include <iostream>
#include <random>

#include "support/move_executor.hpp"
#include "support/plan_layouts.hpp"
#include "vramkit/compactor/chunk_plan.hpp"
#include "vramkit/compactor/plan.hpp"
#include "vramkit/units.hpp"

using namespace vramkit;
using namespace vramkit::compactor;
using vramkit::test::block;
using vramkit::test::execute_and_check;
using vramkit::test::LayoutOptions;
using vramkit::test::OwnedSegment;
using vramkit::test::random_segment;
using vramkit::test::round_up;

TEST_CASE("plan_full without fixed blocks packs blocks at the bottom with only alignment padding", "[plan]") {
  const std::uint64_t seed = vramkit::test::test_seed(0xF0110001);
  std::cout << "plan_full packing: seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 20; ++round) {
    INFO("seed " << seed << ", round " << round);
    const bool mixed_alignment = round % 2 == 1;
    LayoutOptions options{.capacity = 512_KiB};
    if (mixed_alignment) options.alignments = {256, 256, 1024, 4096};
    const std::vector<OwnedSegment> before = {random_segment(rng, options)};
    const auto moves = plan_full(before[0].layout());
    for (const Move& move : moves) REQUIRE(move.to_offset < move.from_offset);
    const auto after = execute_and_check(before, moves, rng());
    std::uint64_t cursor = 0;
    for (const auto& placed : after[0].blocks) {
      REQUIRE(placed.offset == round_up(cursor, placed.alignment));
      cursor = placed.offset + placed.bytes;
    }
    if (!mixed_alignment) {
      // Fragmentation 0: one free range, at the top.
      const auto ranges = vramkit::test::free_ranges(after[0]);
      REQUIRE(ranges.size() == 1);
      REQUIRE(ranges[0].second == after[0].capacity);
      REQUIRE(ranges[0].second - ranges[0].first == vramkit::test::free_bytes(before[0]));
    }
  }
}

TEST_CASE("plan_full emits no move for blocks already in place", "[plan]") {
  OwnedSegment segment{
      .segment = 0,
      .capacity = 64_KiB,
      .granularity = 256,
      .blocks = {block(0, 1024, 1), block(1024, 512, 2), block(4096, 256, 3), block(8192, 256, 4)}};
  const auto moves = plan_full(segment.layout());
  REQUIRE(moves.size() == 2);
  REQUIRE(moves[0].tag == 3);
  REQUIRE(moves[0].to_offset == 1536);
  REQUIRE(moves[1].tag == 4);
  REQUIRE(moves[1].to_offset == 1792);
  OwnedSegment packed{
      .segment = 0, .capacity = 4096, .granularity = 256, .blocks = {block(0, 1024, 1), block(1024, 512, 2)}};
  REQUIRE(plan_full(packed.layout()).empty());
  REQUIRE(plan_full(OwnedSegment{.segment = 0, .capacity = 4096}.layout()).empty());
}

TEST_CASE("plan_full keeps fixed blocks at start, middle and end and fills the gaps before them", "[plan]") {
  SECTION("fixed at the start") {
    const std::vector<OwnedSegment> before = {
        {.segment = 0,
         .capacity = 16_KiB,
         .granularity = 256,
         .blocks = {block(0, 1024, 1, false), block(2048, 1024, 2), block(4096, 512, 3)}}};
    const auto moves = plan_full(before[0].layout());
    REQUIRE(moves.size() == 2);
    REQUIRE(moves[0].to_offset == 1024);
    REQUIRE(moves[1].to_offset == 2048);
    execute_and_check(before, moves, 1);
  }
  SECTION("fixed in the middle: later blocks that fit go into the gap before it, first fit") {
    const std::vector<OwnedSegment> before = {
        {.segment = 0,
         .capacity = 16_KiB,
         .granularity = 256,
         .blocks = {block(1024, 1024, 1), block(3072, 1024, 2, false), block(5120, 3072, 3),
                    block(9216, 1024, 4), block(10240, 1024, 5), block(12288, 512, 6)}}};
    const auto moves = plan_full(before[0].layout());
    const auto after = execute_and_check(before, moves, 2);
    std::map<std::uint32_t, std::uint64_t> offset_of;
    for (const auto& placed : after[0].blocks) offset_of[placed.tag] = placed.offset;
    REQUIRE(offset_of[1] == 0);
    REQUIRE(offset_of[2] == 3072);  // fixed
    REQUIRE(offset_of[3] == 4096);  // 3 KiB does not fit the 2 KiB gap: cursor
    REQUIRE(offset_of[4] == 1024);  // gap
    REQUIRE(offset_of[5] == 2048);  // rest of the gap
    REQUIRE(offset_of[6] == 7168);  // gap full: cursor after block 3
  }
  SECTION("fixed at the end") {
    const std::vector<OwnedSegment> before = {
        {.segment = 0,
         .capacity = 16_KiB,
         .granularity = 256,
         .blocks = {block(2048, 1024, 1), block(8192, 2048, 2), block(16_KiB - 256, 256, 3, false)}}};
    const auto moves = plan_full(before[0].layout());
    const auto after = execute_and_check(before, moves, 3);
    REQUIRE(after[0].blocks[0].offset == 0);
    REQUIRE(after[0].blocks[1].offset == 1024);
    REQUIRE(after[0].blocks[2].offset == 16_KiB - 256);
  }
}

TEST_CASE("plan_full on random layouts with fixed blocks preserves every byte in one phase", "[plan]") {
  const std::uint64_t seed = vramkit::test::test_seed(0xF0110002);
  std::cout << "plan_full with fixed blocks: seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 20; ++round) {
    INFO("seed " << seed << ", round " << round);
    const std::vector<OwnedSegment> before = {random_segment(
        rng, {.capacity = 512_KiB, .fixed_fraction = 0.15, .alignments = {256, 256, 1024, 4096}})};
    const auto moves = plan_full(before[0].layout());
    for (const Move& move : moves) REQUIRE(move.to_offset < move.from_offset);
    execute_and_check(before, moves, rng());
    const auto ranges = vramkit::test::copy_ranges(vramkit::test::make_memory(before), moves);
    REQUIRE(make_chunk_plan(ranges, 4096).phases() <= 1);
  }
}

TEST_CASE("plan_full honours max_bytes_moved with the longest prefix that fits, itself a valid plan",
          "[plan]") {
  const std::uint64_t seed = vramkit::test::test_seed(0xF0110003);
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 10; ++round) {
    INFO("seed " << seed << ", round " << round);
    const std::vector<OwnedSegment> before = {
        random_segment(rng, {.capacity = 256_KiB, .fixed_fraction = 0.1})};
    const auto full = plan_full(before[0].layout());
    const std::uint64_t total = bytes_moved(full);
    for (std::uint64_t budget : {std::uint64_t{0}, total / 3, total / 2 + 256, total - 1, total}) {
      INFO("budget " << budget);
      const auto partial = plan_full(before[0].layout(), budget);
      std::size_t prefix = 0;
      std::uint64_t used = 0;
      while (prefix < full.size() && used + full[prefix].bytes <= budget) used += full[prefix++].bytes;
      REQUIRE(partial.size() == prefix);
      REQUIRE(bytes_moved(partial) == used);
      for (std::size_t k = 0; k < prefix; ++k) {
        REQUIRE(partial[k].tag == full[k].tag);
        REQUIRE(partial[k].to_offset == full[k].to_offset);
      }
      execute_and_check(before, partial, rng());
    }
  }
}

TEST_CASE("plan_full plans blocks of 256 B to 64 MiB in the address model", "[plan]") {
  const std::uint64_t seed = vramkit::test::test_seed(0xF0110004);
  std::mt19937_64 rng(seed);
  INFO("seed " << seed);
  auto before = std::vector<OwnedSegment>{random_segment(
      rng, {.capacity = 8_GiB, .min_bytes = 256, .max_bytes = 64_MiB, .alignments = {256, 4096, 2_MiB}})};
  auto& blocks = before[0].blocks;
  REQUIRE(blocks.size() > 100);
  blocks.front().movable = false;  // start (may already be at 0: then it simply stays)
  blocks[blocks.size() / 2].movable = false;
  blocks.back().movable = false;  // end
  const auto moves = plan_full(before[0].layout());
  const auto after = vramkit::test::apply_in_address_model(before, moves);
  for (const auto& placed : after[0].blocks)
    if (!placed.movable)
      REQUIRE(std::any_of(blocks.begin(), blocks.end(), [&](const LiveBlock& original) {
        return original.tag == placed.tag && original.offset == placed.offset;
      }));
  std::vector<CopyRange> ranges;
  for (const Move& move : moves) ranges.push_back({move.from_offset, move.to_offset, move.bytes});
  const ChunkPlan plan = make_chunk_plan(ranges);
  REQUIRE_NOTHROW(plan.validate());
  REQUIRE(plan.phases() == 1);
  REQUIRE(plan.total_bytes == bytes_moved(moves));
}

TEST_CASE("plan_evacuation empties a segment into the others' holes", "[plan][evacuation]") {
  const std::uint64_t seed = vramkit::test::test_seed(0xF0110006);
  std::mt19937_64 rng(seed);
  INFO("seed " << seed);
  std::vector<OwnedSegment> segments = {
      random_segment(rng, {.capacity = 256_KiB, .free_fraction = 0.6, .alignments = {256, 1024}}, 0, 1),
      random_segment(rng, {.capacity = 256_KiB, .free_fraction = 0.6, .alignments = {256, 1024}}, 1, 10000),
      random_segment(rng, {.capacity = 64_KiB, .free_fraction = 0.5, .alignments = {256, 4096}}, 2, 20000)};
  SECTION("everything fits") {
    const auto moves = plan_evacuation(vramkit::test::layouts_of(segments), 2);
    REQUIRE(moves);
    REQUIRE(moves->size() == segments[2].blocks.size());
    const auto after = execute_and_check(segments, *moves, rng());
    REQUIRE(after[2].blocks.empty());
  }
  SECTION("a fixed block stays, so the segment cannot be emptied") {
    segments[2].blocks.back().movable = false;
    REQUIRE_FALSE(plan_evacuation(vramkit::test::layouts_of(segments), 2));
  }
  SECTION("an empty segment needs no moves") {
    segments[2].blocks.clear();
    const auto moves = plan_evacuation(vramkit::test::layouts_of(segments), 2);
    REQUIRE(moves);
    REQUIRE(moves->empty());
  }
}

TEST_CASE("plan_evacuation fails when no hole is large enough, even with enough free bytes",
          "[plan][evacuation]") {
  // 1.5 KiB free in total, in 512 B holes: a 1 KiB block cannot go anywhere.
  const std::vector<OwnedSegment> segments = {
      {.segment = 0,
       .capacity = 3072,
       .granularity = 256,
       .blocks = {block(512, 512, 1), block(1536, 512, 2), block(2560, 512, 3)}},
      {.segment = 1, .capacity = 1024, .granularity = 256, .blocks = {block(0, 1024, 4)}}};
  REQUIRE_FALSE(plan_evacuation(vramkit::test::layouts_of(segments), 1));
  // The 512 B blocks of segment 0 fit segment 1 once it is empty... but it is not; moving 4 out
  // first is the pool's business. Evacuating segment 0 fails too: no space elsewhere.
  REQUIRE_FALSE(plan_evacuation(vramkit::test::layouts_of(segments), 0));
}

TEST_CASE("plan_evacuation honours each block's alignment", "[plan][evacuation]") {
  // The only hole large enough at a 4 KiB boundary is at 4096, after an unaligned one at 256.
  const std::vector<OwnedSegment> segments = {
      {.segment = 0,
       .capacity = 16_KiB,
       .granularity = 256,
       .blocks = {block(0, 256, 1), block(2048, 2048, 2), block(8192, 8192, 3)}},
      {.segment = 1,
       .capacity = 4096,
       .granularity = 256,
       .blocks = {{.offset = 0, .bytes = 1024, .alignment = 4096, .movable = true, .tag = 4}}}};
  const auto moves = plan_evacuation(vramkit::test::layouts_of(segments), 1);
  REQUIRE(moves);
  REQUIRE(moves->size() == 1);
  REQUIRE((*moves)[0].to_offset == 4096);
  execute_and_check(segments, *moves, 7);
}

TEST_CASE("bytes_moved adds up the moves' sizes", "[plan]") {
  const std::vector<Move> moves = {{.bytes = 256}, {.bytes = 1_MiB}, {.bytes = 4_GiB}};
  REQUIRE(bytes_moved(moves) == 256 + 1_MiB + 4_GiB);
  REQUIRE(bytes_moved(std::vector<Move>{}) == 0);
}

TEST_CASE("FullPlanner fed in parts plans what plan_full plans, and each part runs after the one before",
          "[plan]") {
  const std::uint64_t seed = vramkit::test::test_seed(0xF0110002);
  std::cout << "FullPlanner parts: seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 40; ++round) {
    INFO("seed " << seed << ", round " << round);
    LayoutOptions options{.capacity = 512_KiB, .fixed_fraction = round % 2 == 0 ? 0.0 : 0.1};
    if (round % 4 == 3) options.alignments = {256, 1024, 4096};
    const std::vector<OwnedSegment> before = {random_segment(rng, options)};
    const SegmentLayout layout = before[0].layout();
    const std::uint64_t budget = round % 3 == 2 ? rng() % (64_KiB) : UINT64_MAX;
    const auto whole = plan_full(layout, budget);

    FullPlanner planner(layout.segment, budget);
    std::vector<Move> moves;
    std::vector<std::size_t> part_ends;  // moves.size() after each part
    for (std::size_t next = 0; next < layout.blocks.size();) {
      const std::size_t count = std::min<std::size_t>(1 + rng() % 12, layout.blocks.size() - next);
      planner.add(layout.blocks.subspan(next, count), moves);
      part_ends.push_back(moves.size());
      next += count;
    }
    REQUIRE(moves.size() == whole.size());
    for (std::size_t i = 0; i < moves.size(); ++i) {
      REQUIRE(moves[i].tag == whole[i].tag);
      REQUIRE(moves[i].from_offset == whole[i].from_offset);
      REQUIRE(moves[i].to_offset == whole[i].to_offset);
    }
    REQUIRE(planner.bytes_moved() == bytes_moved(whole));
    REQUIRE(planner.bytes_moved() <= budget);
    // Each part alone, after the parts before it: the bytes end where the whole plan puts them.
    std::vector<OwnedSegment> state = before;
    std::size_t begin = 0;
    for (const std::size_t end : part_ends) {
      if (end == begin) continue;
      state = execute_and_check(state, std::vector<Move>(moves.begin() + begin, moves.begin() + end), rng());
      begin = end;
    }
  }
}
