#pragma once
// Fixtures of the tests that compare a compaction shared by threads with one made by one thread:
// a heap scattered by churn, and a pool's block map to compare.
#include <cstdint>
#include <random>
#include <tuple>
#include <vector>

#include <vramkit/heap.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/units.hpp>

#include "support/patterns.hpp"

namespace vramkit_test {

/// A 64 MiB heap after `steps` random allocations and frees, its node ids scattered over its addresses.
inline vramkit::Heap churned_heap(std::mt19937_64& rng, std::uint32_t steps) {
  using namespace vramkit;
  Heap heap(64_MiB, 256);
  std::vector<BlockId> live;
  for (std::uint32_t step = 0; step < steps; ++step) {
    if (live.empty() || rng() % 3 != 0) {
      if (const auto placed = heap.allocate(256 * (1 + rng() % 32), 256, step)) live.push_back(placed->block);
    } else {
      const std::size_t pick = rng() % live.size();
      heap.free(live[pick]);
      live[pick] = live.back();
      live.pop_back();
    }
  }
  return heap;
}

using BlockMap =
    std::vector<std::tuple<std::uint32_t, std::uint64_t, std::uint64_t, vramkit::BlockState, std::uint32_t>>;

/// Every block of the pool: segment, offset, size, state and slot (the same in two pools that made
/// the same requests in the same order).
inline BlockMap map_of(const vramkit::Pool& pool) {
  BlockMap map;
  for (const vramkit::BlockInfo& block : pool.block_map())
    map.emplace_back(block.segment, block.offset, block.bytes, block.state,
                     block.state == vramkit::BlockState::free ? 0 : block.slot);
  return map;
}

/// `count` blocks of 256 or 512 bytes (sizes drawn from `seed`), then every other one freed, the
/// first included, and each kept one written with write_pattern: the i-th kept holds key 2i + 1.
inline std::vector<vramkit::Handle> keep_every_other(vramkit::Pool& pool, std::size_t count, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<vramkit::Handle> all, kept;
  for (std::size_t i = 0; i < count; ++i) all.push_back(pool.allocate(256 * (1 + rng() % 2)));
  for (std::size_t i = 0; i < all.size(); ++i) {
    if (i % 2 == 0) {
      pool.free(all[i]);
    } else {
      kept.push_back(all[i]);
      write_pattern(pool, all[i], i);
    }
  }
  return kept;
}

}  // namespace vramkit_test
