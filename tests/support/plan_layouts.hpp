#pragma once
// Layouts for planner tests: random segments, the brute-force cheapest window, and checks that a
// plan keeps every byte (in order and as a chunk plan run in a random order) and leaves its hole free.
#include <cmath>
#include <optional>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "support/move_executor.hpp"
#include "vramkit/compactor/chunk_plan.hpp"
#include "vramkit/compactor/plan.hpp"
#include "vramkit/units.hpp"

namespace vramkit::test {

using compactor::HolePlan;
using vramkit::operator""_KiB;
using vramkit::operator""_MiB;

struct LayoutOptions {
  std::uint64_t capacity = 1_MiB;
  std::uint64_t min_bytes = 256;
  std::uint64_t max_bytes = 16_KiB;
  double free_fraction = 0.5;  ///< Expected share of gaps.
  double fixed_fraction = 0.0;
  std::vector<std::uint64_t> alignments = {256};
};

inline std::uint64_t round_up(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

/// Blocks of log-uniform sizes with random gaps in front, until the segment is full.
inline OwnedSegment random_segment(std::mt19937_64& rng, const LayoutOptions& options,
                                   std::uint32_t segment = 0, std::uint32_t first_tag = 1) {
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
inline std::vector<OwnedSegment> execute_and_check(const std::vector<OwnedSegment>& before,
                                                   gsl::span<const Move> moves, std::uint64_t seed) {
  INFO("seed " << seed);
  const auto after = apply_in_address_model(before, moves);
  auto in_order = make_memory(before);
  auto as_chunks = in_order;
  apply_sequentially(in_order, moves);
  check_blocks_intact(in_order, after);

  const auto ranges = copy_ranges(as_chunks, moves);
  const ChunkPlan plan = make_chunk_plan(ranges, 4096);
  REQUIRE_NOTHROW(plan.validate());
  const auto expected = batch_memmove_reference(as_chunks.bytes, ranges);
  std::mt19937_64 rng(seed);
  execute_randomly(plan, as_chunks.bytes, rng);
  REQUIRE(as_chunks.bytes == expected);
  check_blocks_intact(as_chunks, after);
  return after;
}

/// Smallest movable bytes over all windows of `bytes` at multiples of `alignment` that hold no
/// fixed block, by trying every window. nullopt when there is none.
inline std::optional<std::uint64_t> brute_force_hole_cost(const std::vector<OwnedSegment>& segments,
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
inline void check_hole_is_free(const std::vector<OwnedSegment>& after, const HolePlan& plan,
                               std::uint64_t bytes, std::uint64_t alignment) {
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

inline LiveBlock block(std::uint64_t offset, std::uint64_t bytes, std::uint32_t tag, bool movable = true) {
  return {.offset = offset, .bytes = bytes, .alignment = 256, .movable = movable, .tag = tag};
}

}  // namespace vramkit::test
