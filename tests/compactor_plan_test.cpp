// Compaction planning: full compaction, minimal holes, evacuation. Every plan is checked in an
// address model and, where the sizes allow, by moving real bytes (in order, and as a chunk plan
// executed in random orders).
#include <catch2/catch.hpp>

#include <cmath>
#include <iostream>
#include <random>

#include "support/move_executor.hpp"
#include "vramkit/compactor/chunk_plan.hpp"
#include "vramkit/compactor/plan.hpp"
#include "vramkit/units.hpp"

using namespace vramkit;
using namespace vramkit::compactor;
using vramkit::test::OwnedSegment;

namespace {

struct LayoutOptions {
  std::uint64_t capacity = 1_MiB;
  std::uint64_t min_bytes = 256;
  std::uint64_t max_bytes = 16_KiB;
  double free_fraction = 0.5;  ///< Expected share of gaps.
  double fixed_fraction = 0.0;
  std::vector<std::uint64_t> alignments = {256};
};

std::uint64_t round_up(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/// Blocks of log-uniform sizes with random gaps in front, until the segment is full.
OwnedSegment random_segment(std::mt19937_64& rng, const LayoutOptions& options, std::uint32_t segment = 0,
                            std::uint32_t first_tag = 1) {
  OwnedSegment owned{.segment = segment, .capacity = options.capacity, .granularity = 256, .blocks = {}};
  std::uniform_real_distribution<double> log_size(std::log(double(options.min_bytes)),
                                                  std::log(double(options.max_bytes)));
  std::uniform_real_distribution<double> unit(0, 1);
  std::uint64_t cursor = 0;
  std::uint32_t tag = first_tag;
  for (;;) {
    const std::uint64_t bytes = round_up(static_cast<std::uint64_t>(std::exp(log_size(rng))), 256);
    const std::uint64_t alignment = options.alignments[rng() % options.alignments.size()];
    // A gap as large as the block on average times free/(1-free).
    const double gap_share = options.free_fraction / (1 - options.free_fraction);
    std::uint64_t gap = static_cast<std::uint64_t>(2 * unit(rng) * gap_share * double(bytes));
    const std::uint64_t offset = round_up(cursor + round_up(gap, 256), alignment);
    if (offset + bytes > options.capacity) break;
    owned.blocks.push_back({.offset = offset,
                            .bytes = bytes,
                            .alignment = alignment,
                            .movable = unit(rng) >= options.fixed_fraction,
                            .tag = tag++});
    cursor = offset + bytes;
  }
  return owned;
}

/// Executes the moves on simulated memory twice (in order; as a chunk plan in a random order) and
/// checks that every block's bytes are where the address model says. Returns the layout after.
std::vector<OwnedSegment> execute_and_check(const std::vector<OwnedSegment>& before,
                                            gsl::span<const Move> moves, std::uint64_t seed) {
  INFO("seed " << seed);
  const auto after = vramkit::test::apply_in_address_model(before, moves);
  auto in_order = vramkit::test::make_memory(before);
  auto as_chunks = in_order;
  vramkit::test::apply_sequentially(in_order, moves);
  vramkit::test::check_blocks_intact(in_order, after);

  const auto ranges = vramkit::test::copy_ranges(as_chunks, moves);
  const ChunkPlan plan = make_chunk_plan(ranges, 4096);
  REQUIRE_NOTHROW(plan.validate());
  const auto expected = vramkit::test::batch_memmove_reference(as_chunks.bytes, ranges);
  std::mt19937_64 rng(seed);
  vramkit::test::execute_randomly(plan, as_chunks.bytes, rng);
  REQUIRE(as_chunks.bytes == expected);
  vramkit::test::check_blocks_intact(as_chunks, after);
  return after;
}

/// Smallest movable bytes over all windows of `bytes` at multiples of `alignment` that hold no
/// fixed block, by trying every window. nullopt when there is none.
std::optional<std::uint64_t> brute_force_hole_cost(const std::vector<OwnedSegment>& segments,
                                                   std::uint64_t bytes, std::uint64_t alignment) {
  std::optional<std::uint64_t> best;
  for (const auto& segment : segments) {
    for (std::uint64_t start = 0; start + bytes <= segment.capacity; start += alignment) {
      std::uint64_t cost = 0;
      bool fixed = false;
      for (const auto& block : segment.blocks)
        if (block.offset < start + bytes && start < block.offset + block.bytes) {
          cost += block.bytes;
          fixed = fixed || !block.movable;
        }
      if (!fixed && (!best || cost < *best)) best = cost;
    }
  }
  return best;
}

/// The window is free once the plan ran.
void check_hole_is_free(const std::vector<OwnedSegment>& after, const HolePlan& plan, std::uint64_t bytes,
                        std::uint64_t alignment) {
  REQUIRE(plan.offset % alignment == 0);
  for (const auto& segment : after) {
    if (segment.segment != plan.segment) continue;
    REQUIRE(plan.offset + bytes <= segment.capacity);
    for (const auto& block : segment.blocks) {
      INFO("block tag " << block.tag << " at " << block.offset);
      REQUIRE_FALSE((block.offset < plan.offset + bytes && plan.offset < block.offset + block.bytes));
    }
  }
}

LiveBlock block(std::uint64_t offset, std::uint64_t bytes, std::uint32_t tag, bool movable = true) {
  return {.offset = offset, .bytes = bytes, .alignment = 256, .movable = movable, .tag = tag};
}

}  // namespace

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

TEST_CASE("plan_hole finds the cheapest window on hand-built layouts", "[plan][hole]") {
  // Segment 0: A B . C . D ; segment 1: E and a 1 KiB hole (too small for the window itself).
  std::vector<OwnedSegment> segments = {
      {.segment = 0,
       .capacity = 8_KiB,
       .granularity = 256,
       .blocks = {block(0, 1024, 1), block(1024, 1024, 2), block(2560, 256, 3), block(3584, 4608, 4)}},
      {.segment = 1, .capacity = 1280, .granularity = 256, .blocks = {block(0, 256, 5)}}};
  SECTION("the window around the small block C") {
    const auto plan = plan_hole(vramkit::test::layouts_of(segments), 1536, 256);
    REQUIRE(plan);
    REQUIRE(plan->segment == 0);
    REQUIRE(plan->offset == 2048);
    REQUIRE(plan->moves.size() == 1);
    REQUIRE(plan->moves[0].tag == 3);
    REQUIRE(plan->moves[0].to_segment == 1);
    REQUIRE(plan->moves[0].to_offset == 256);
    const auto after = execute_and_check(segments, plan->moves, 4);
    check_hole_is_free(after, *plan, 1536, 256);
  }
  SECTION("C fixed: the window moves B instead") {
    segments[0].blocks[2].movable = false;
    const auto plan = plan_hole(vramkit::test::layouts_of(segments), 1536, 256);
    REQUIRE(plan);
    REQUIRE(plan->offset == 1024);
    REQUIRE(bytes_moved(plan->moves) == 1024);
    check_hole_is_free(execute_and_check(segments, plan->moves, 5), *plan, 1536, 256);
  }
  SECTION("a byte budget below the cheapest window gives nothing") {
    REQUIRE_FALSE(plan_hole(vramkit::test::layouts_of(segments), 1536, 256, 255));
    REQUIRE(plan_hole(vramkit::test::layouts_of(segments), 1536, 256, 256));
  }
  SECTION("an aligned window: the cheapest of the 1 KiB-aligned ones") {
    const auto plan = plan_hole(vramkit::test::layouts_of(segments), 1024, 1024);
    REQUIRE(plan);
    REQUIRE(plan->offset % 1024 == 0);
    REQUIRE(bytes_moved(plan->moves) == 256);  // [2048, 3072) holds only C
    REQUIRE(plan->offset == 2048);
  }
}

TEST_CASE("plan_hole returns a free window without moves", "[plan][hole]") {
  const std::vector<OwnedSegment> segments = {{.segment = 3,
                                               .capacity = 8_KiB,
                                               .granularity = 256,
                                               .blocks = {block(0, 1024, 1), block(4096, 1024, 2)}}};
  const auto plan = plan_hole(vramkit::test::layouts_of(segments), 3072, 1024);
  REQUIRE(plan);
  REQUIRE(plan->segment == 3);
  REQUIRE(plan->offset == 1024);
  REQUIRE(plan->moves.empty());
}

TEST_CASE("plan_hole tries the next-cheapest window when the cheapest cannot be placed", "[plan][hole]") {
  // The cheapest window (segment 0, A: 1280 B) has no hole large enough for A anywhere; the next
  // (segment 1, B + C: 1536 B) can go to segment 0's and segment 2's holes.
  const std::vector<OwnedSegment> segments = {
      {.segment = 0, .capacity = 2048, .granularity = 256, .blocks = {block(0, 1280, 1)}},
      {.segment = 1, .capacity = 2048, .granularity = 256, .blocks = {block(0, 768, 2), block(1024, 768, 3)}},
      {.segment = 2, .capacity = 1024, .granularity = 256, .blocks = {}}};
  const auto plan = plan_hole(vramkit::test::layouts_of(segments), 2048, 256);
  REQUIRE(plan);
  REQUIRE(plan->segment == 1);
  REQUIRE(plan->offset == 0);
  REQUIRE(bytes_moved(plan->moves) == 1536);
  check_hole_is_free(execute_and_check(segments, plan->moves, 6), *plan, 2048, 256);
}

TEST_CASE("plan_hole slides a run of blocks down when no window's blocks fit outside it", "[plan][hole]") {
  // Free space: [768, 1024) and [1792, 2048). Every 512 B window overlaps A or B (768 B each), and
  // neither fits in a 256 B hole; sliding B down to 768 gathers both pieces into [1536, 2048).
  const std::vector<OwnedSegment> segments = {
      {.segment = 0, .capacity = 2048, .granularity = 256, .blocks = {block(0, 768, 1), block(1024, 768, 2)}}};
  const auto plan = plan_hole(vramkit::test::layouts_of(segments), 512, 256);
  REQUIRE(plan);
  REQUIRE(plan->offset == 1536);
  REQUIRE(plan->moves.size() == 1);
  REQUIRE(plan->moves[0].to_offset == 768);
  REQUIRE_FALSE(plan_hole(vramkit::test::layouts_of(segments), 512, 256, 767));
  check_hole_is_free(execute_and_check(segments, plan->moves, 7), *plan, 512, 256);
}

TEST_CASE("plan_hole returns nullopt when no plan exists", "[plan][hole]") {
  const std::vector<OwnedSegment> segments = {{.segment = 0,
                                               .capacity = 4096,
                                               .granularity = 256,
                                               .blocks = {block(0, 256, 1), block(1024, 256, 2, false),
                                                          block(2048, 512, 3), block(3072, 256, 4, false)}}};
  const auto layouts = vramkit::test::layouts_of(segments);
  SECTION("larger than any segment") {
    REQUIRE_FALSE(plan_hole(layouts, 4096 + 256, 256));
  }
  SECTION("every window holds a fixed block") {
    REQUIRE_FALSE(plan_hole(layouts, 2048, 256));
  }
  SECTION("the blocks have nowhere to go") {
    // [0, 1024) needs block 1 moved, and the only free space left is inside windows of its own.
    const std::vector<OwnedSegment> full = {{.segment = 0,
                                             .capacity = 2048,
                                             .granularity = 256,
                                             .blocks = {block(0, 1024, 1), block(1024, 1024, 2)}}};
    REQUIRE_FALSE(plan_hole(vramkit::test::layouts_of(full), 1024, 256));
  }
  SECTION("small enough, it works") {
    REQUIRE(plan_hole(layouts, 768, 256));
  }
}

TEST_CASE("plan_hole moves exactly the brute-force minimum on small random layouts", "[plan][hole]") {
  const std::uint64_t seed = vramkit::test::test_seed(0xF0110005);
  std::cout << "plan_hole brute force: seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  int planned = 0;
  for (int round = 0; round < 150; ++round) {
    INFO("seed " << seed << ", round " << round);
    const std::uint64_t bytes = 256 * (4 + rng() % 7);  // 1 KiB .. 2.5 KiB
    const std::uint64_t alignment = std::uint64_t{256} << (rng() % 3);
    std::vector<OwnedSegment> segments;
    std::uint32_t tag = 1;
    for (std::uint32_t s = 0; s < 2; ++s) {
      segments.push_back(random_segment(rng,
                                        {.capacity = 8_KiB,
                                         .min_bytes = 256,
                                         .max_bytes = 512,
                                         .free_fraction = 0.3,
                                         .fixed_fraction = 0.15},
                                        s, tag));
      tag += 1000;
    }
    // Empty helpers too small to hold the window: room for any window's blocks, so that only
    // the choice of window decides the cost.
    for (std::uint32_t s = 2; s < 14; ++s)
      segments.push_back({.segment = s, .capacity = bytes - 256, .granularity = 256, .blocks = {}});
    const auto expected = brute_force_hole_cost(segments, bytes, alignment);
    const auto plan = plan_hole(vramkit::test::layouts_of(segments), bytes, alignment);
    INFO("bytes " << bytes << ", alignment " << alignment);
    REQUIRE(plan.has_value() == expected.has_value());
    if (!plan) continue;
    ++planned;
    REQUIRE(bytes_moved(plan->moves) == *expected);
    check_hole_is_free(execute_and_check(segments, plan->moves, rng()), *plan, bytes, alignment);
    if (*expected > 0)
      REQUIRE_FALSE(plan_hole(vramkit::test::layouts_of(segments), bytes, alignment, *expected - 1));
  }
  REQUIRE(planned > 100);
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
