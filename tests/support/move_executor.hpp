#pragma once
// Reference executors for compactor tests: an address model (where every block ends up), simulated
// memory (every live byte carries a pattern derived from its block's tag), and a ChunkPlan executor
// that runs chunks in a random order allowed by the dependency rules.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include "vramkit/compactor/chunk_plan.hpp"
#include "vramkit/compactor/plan.hpp"

namespace vramkit::test {

using compactor::ChunkPlan;
using compactor::CopyRange;
using compactor::LiveBlock;
using compactor::Move;
using compactor::SegmentLayout;

/// A segment whose blocks the test owns (SegmentLayout only views them).
struct OwnedSegment {
  std::uint32_t segment = 0;
  std::uint64_t capacity = 0;
  std::uint64_t granularity = 256;
  std::vector<LiveBlock> blocks;

  SegmentLayout layout() const { return {segment, capacity, granularity, blocks}; }
};

inline std::vector<SegmentLayout> layouts_of(const std::vector<OwnedSegment>& segments) {
  std::vector<SegmentLayout> result;
  for (const auto& segment : segments) result.push_back(segment.layout());
  return result;
}

inline std::uint64_t free_bytes(const OwnedSegment& segment) {
  std::uint64_t used = 0;
  for (const auto& block : segment.blocks) used += block.bytes;
  return segment.capacity - used;
}

/// Free ranges [begin, end) of a segment in address order.
inline std::vector<std::pair<std::uint64_t, std::uint64_t>> free_ranges(const OwnedSegment& segment) {
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  std::uint64_t cursor = 0;
  for (const auto& block : segment.blocks) {
    if (cursor < block.offset) ranges.emplace_back(cursor, block.offset);
    cursor = block.offset + block.bytes;
  }
  if (cursor < segment.capacity) ranges.emplace_back(cursor, segment.capacity);
  return ranges;
}

/// Applies moves to the block positions and checks them: each move takes a movable block from
/// where it is, each block moves at most once, and afterwards blocks are aligned, inside their
/// segment and disjoint. Returns the layout afterwards (blocks sorted by offset).
inline std::vector<OwnedSegment> apply_in_address_model(const std::vector<OwnedSegment>& before,
                                                        gsl::span<const Move> moves) {
  std::map<std::uint32_t, std::size_t> index_of;
  for (std::size_t i = 0; i < before.size(); ++i) index_of[before[i].segment] = i;
  struct Placed {
    LiveBlock block;
    std::size_t segment;
    bool moved = false;
  };
  std::map<std::uint32_t, Placed> by_tag;
  for (std::size_t i = 0; i < before.size(); ++i)
    for (const auto& block : before[i].blocks) {
      REQUIRE(by_tag.count(block.tag) == 0);  // tests give blocks distinct tags
      by_tag[block.tag] = {block, i};
    }
  for (const Move& move : moves) {
    INFO("move of tag " << move.tag << " from " << move.from_segment << ":" << move.from_offset << " to "
                        << move.to_segment << ":" << move.to_offset);
    REQUIRE(by_tag.count(move.tag) == 1);
    Placed& placed = by_tag[move.tag];
    REQUIRE(placed.block.movable);
    REQUIRE_FALSE(placed.moved);
    REQUIRE(before[placed.segment].segment == move.from_segment);
    REQUIRE(placed.block.offset == move.from_offset);
    REQUIRE(placed.block.bytes == move.bytes);
    REQUIRE(index_of.count(move.to_segment) == 1);
    REQUIRE(move.to_offset % std::max<std::uint64_t>(placed.block.alignment, 1) == 0);
    placed.moved = true;
    placed.segment = index_of[move.to_segment];
    placed.block.offset = move.to_offset;
  }
  std::vector<OwnedSegment> after = before;
  for (auto& segment : after) segment.blocks.clear();
  for (const auto& [tag, placed] : by_tag) after[placed.segment].blocks.push_back(placed.block);
  for (auto& segment : after) {
    std::sort(segment.blocks.begin(), segment.blocks.end(),
              [](const LiveBlock& a, const LiveBlock& b) { return a.offset < b.offset; });
    std::uint64_t cursor = 0;
    for (const auto& block : segment.blocks) {
      INFO("segment " << segment.segment << ", block tag " << block.tag << " at " << block.offset);
      REQUIRE(block.offset >= cursor);
      cursor = block.offset + block.bytes;
    }
    REQUIRE(cursor <= segment.capacity);
  }
  return after;
}

/// All segments laid end to end in one byte array; live bytes carry their block's pattern.
struct FlatMemory {
  std::vector<std::uint64_t> base;  ///< Per segment index.
  std::map<std::uint32_t, std::uint64_t> base_of_segment;
  std::vector<std::uint8_t> bytes;
};

inline std::uint8_t pattern_byte(std::uint32_t tag, std::uint64_t position) {
  std::uint64_t z = (static_cast<std::uint64_t>(tag) << 40) ^ (position / 8) ^ 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z ^= z >> 31;
  return static_cast<std::uint8_t>(z >> (8 * (position % 8)));
}

inline FlatMemory make_memory(const std::vector<OwnedSegment>& segments) {
  FlatMemory memory;
  std::uint64_t total = 0;
  for (const auto& segment : segments) {
    memory.base.push_back(total);
    memory.base_of_segment[segment.segment] = total;
    total += segment.capacity;
  }
  memory.bytes.assign(total, 0xEE);
  for (std::size_t i = 0; i < segments.size(); ++i)
    for (const auto& block : segments[i].blocks)
      for (std::uint64_t k = 0; k < block.bytes; ++k)
        memory.bytes[memory.base[i] + block.offset + k] = pattern_byte(block.tag, k);
  return memory;
}

inline std::vector<CopyRange> copy_ranges(const FlatMemory& memory, gsl::span<const Move> moves) {
  std::vector<CopyRange> ranges;
  for (const Move& move : moves)
    ranges.push_back({memory.base_of_segment.at(move.from_segment) + move.from_offset,
                      memory.base_of_segment.at(move.to_segment) + move.to_offset, move.bytes});
  return ranges;
}

/// Moves one after another, each a memmove: the semantics of a plan (and of each prefix of one).
inline void apply_sequentially(FlatMemory& memory, gsl::span<const Move> moves) {
  for (const CopyRange& range : copy_ranges(memory, moves))
    std::memmove(memory.bytes.data() + range.destination, memory.bytes.data() + range.source, range.bytes);
}

/// Every block of `after` holds its own pattern where the address model put it.
inline void check_blocks_intact(const FlatMemory& memory, const std::vector<OwnedSegment>& after) {
  std::size_t broken = 0;
  std::uint32_t first_broken_tag = 0;
  for (std::size_t i = 0; i < after.size(); ++i)
    for (const auto& block : after[i].blocks)
      for (std::uint64_t k = 0; k < block.bytes; ++k)
        if (memory.bytes[memory.base[i] + block.offset + k] != pattern_byte(block.tag, k)) {
          if (broken++ == 0) first_broken_tag = block.tag;
          break;
        }
  INFO("first broken block: tag " << first_broken_tag);
  REQUIRE(broken == 0);
}

/// What executing the copies must produce: every destination gets its source's bytes as they were
/// before any copy (memmove semantics for the whole batch); all other bytes are unchanged.
inline std::vector<std::uint8_t> batch_memmove_reference(const std::vector<std::uint8_t>& before,
                                                         gsl::span<const CopyRange> moves) {
  std::vector<std::uint8_t> after = before;
  for (const CopyRange& move : moves)
    std::memcpy(after.data() + move.destination, before.data() + move.source, move.bytes);
  return after;
}

/// Runs a ChunkPlan the way the kernel may: phases one after another; within a phase a chunk reads
/// its whole source at any time, and writes once it has read and every chunk of [wait_first,
/// wait_last] has read. Events are picked at random (writes favoured, to expose missing waits).
inline void execute_randomly(const ChunkPlan& plan, std::vector<std::uint8_t>& memory, std::mt19937_64& rng) {
  for (std::size_t phase = 0; phase < plan.phases(); ++phase) {
    const std::uint32_t begin = plan.phase_begin[phase];
    const std::uint32_t end = plan.phase_begin[phase + 1];
    const std::size_t count = end - begin;
    std::vector<std::vector<std::uint8_t>> staged(count);
    std::vector<bool> read(count, false);
    std::vector<std::uint32_t> unread_waits(count, 0);
    std::vector<std::vector<std::uint32_t>> waiters(count);
    for (std::uint32_t x = begin; x < end; ++x) {
      const auto& chunk = plan.chunks[x];
      if (chunk.wait_first == compactor::no_wait) continue;
      // A wait outside the phase could deadlock the launch.
      if (chunk.wait_first < begin || chunk.wait_last >= end || chunk.wait_first > chunk.wait_last)
        FAIL("chunk " << x << " of phase " << phase << " waits for [" << chunk.wait_first << ", "
                      << chunk.wait_last << "]");
      for (std::uint32_t y = chunk.wait_first; y <= chunk.wait_last; ++y) {
        waiters[y - begin].push_back(x - begin);
        ++unread_waits[x - begin];
      }
    }
    std::vector<std::uint32_t> readable(count);
    for (std::uint32_t i = 0; i < count; ++i) readable[i] = i;
    std::vector<std::uint32_t> writable;
    std::size_t written = 0;
    auto take_random = [&](std::vector<std::uint32_t>& from) {
      std::uniform_int_distribution<std::size_t> pick(0, from.size() - 1);
      const std::size_t at = pick(rng);
      const std::uint32_t value = from[at];
      from[at] = from.back();
      from.pop_back();
      return value;
    };
    while (written < count) {
      if (readable.empty() && writable.empty()) FAIL("phase " << phase << " deadlocks");
      const bool write = !writable.empty() && (readable.empty() || rng() % 3 != 0);
      if (write) {
        const std::uint32_t i = take_random(writable);
        const auto& chunk = plan.chunks[begin + i];
        std::memcpy(memory.data() + chunk.destination, staged[i].data(), chunk.bytes);
        ++written;
        continue;
      }
      const std::uint32_t i = take_random(readable);
      const auto& chunk = plan.chunks[begin + i];
      staged[i].assign(memory.begin() + static_cast<std::ptrdiff_t>(chunk.source),
                       memory.begin() + static_cast<std::ptrdiff_t>(chunk.source + chunk.bytes));
      read[i] = true;
      if (unread_waits[i] == 0) writable.push_back(i);
      for (std::uint32_t waiter : waiters[i])
        if (--unread_waits[waiter] == 0 && read[waiter]) writable.push_back(waiter);
    }
  }
}

/// Seed for a test's random choices: Catch's --rng-seed when given, else `fallback`.
inline std::uint64_t test_seed(std::uint64_t fallback) {
  const unsigned given = Catch::rngSeed();
  return given != 0 ? given : fallback;
}

}  // namespace vramkit::test
