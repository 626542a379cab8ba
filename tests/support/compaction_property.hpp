#pragma once
// The compaction property test, shared by the host tests and the GPU test program: random
// allocate / free / pin / unpin / write / compact sequences; after each compaction every live
// buffer's bytes are checked, pinned buffers must not have moved, and a full compaction with
// nothing pinned must leave fragmentation 0.
#include <catch2/catch.hpp>

#include <cmath>
#include <iostream>
#include <map>
#include <memory>
#include <random>

#include <vramkit/pool.hpp>
#include <vramkit/units.hpp>

#include "support/patterns.hpp"

namespace vramkit_test {
using namespace vramkit;

struct LiveBuffer {
  std::uint64_t key;
  int pins;
};

// Random allocate / free / pin / unpin / write / compact sequences; after each compaction every live
// buffer's bytes are checked, and a full compaction with nothing pinned leaves fragmentation 0.
inline void run_property_test(std::shared_ptr<vramkit::Device> device, std::uint64_t seed, int operations,
                              std::uint64_t capacity = 8_MiB) {
  std::cout << "pool compaction property test seed " << seed << (seed % 2 == 1 ? " (in parts)" : "") << '\n';
  INFO("seed " << seed);
  std::mt19937_64 random(seed);
  // Odd seeds plan full compactions in parts (the device moving a part while the next is
  // planned), even seeds plan them first: the blocks here are too small for the automatic choice.
  const CompactionParts parts = seed % 2 == 1 ? CompactionParts::always : CompactionParts::never;
  Pool pool({.capacity_bytes = capacity,
             .max_capacity_bytes = 2 * capacity,
             .segment_bytes = capacity / 4,
             .compaction_parts = parts},
            device);
  std::map<std::uint32_t, std::pair<Handle, LiveBuffer>> live;
  std::uint64_t next_key = 1;
  std::uniform_real_distribution<double> log_size(std::log(1.0), std::log(static_cast<double>(capacity) / 32));
  auto pick = [&]() {
    auto it = live.begin();
    std::advance(it, static_cast<long>(random() % live.size()));
    return it;
  };
  for (int step = 0; step < operations; ++step) {
    const unsigned choice = random() % 100;
    if (choice < 40 || live.empty()) {
      const auto bytes = static_cast<std::uint64_t>(std::exp(log_size(random)));
      const std::uint64_t alignment = random() % 10 == 0 ? 4096 : 256;
      try {
        const Handle handle = pool.allocate(bytes, alignment);
        REQUIRE(pool.address(handle) % alignment == 0);
        write_pattern(pool, handle, next_key);
        live[handle.slot] = {handle, {next_key++, 0}};
      } catch (const out_of_memory&) {
        // Legitimate only when the free space really cannot hold it.
        const auto statistics = pool.statistics();
        REQUIRE((statistics.free_bytes + (2 * capacity - statistics.reserved_bytes) < bytes + 4096 ||
                 statistics.pinned_allocations > 0));
      }
    } else if (choice < 65) {
      auto it = pick();
      if (it->second.second.pins == 0) {
        REQUIRE(holds_pattern(pool, it->second.first, it->second.second.key));
        pool.free(it->second.first);
        live.erase(it);
      }
    } else if (choice < 75) {
      auto it = pick();
      pool.pin(it->second.first);
      ++it->second.second.pins;
    } else if (choice < 85) {
      auto it = pick();
      if (it->second.second.pins > 0) {
        pool.unpin(it->second.first);
        --it->second.second.pins;
      }
    } else if (choice < 90) {
      auto it = pick();
      it->second.second.key = next_key++;
      write_pattern(pool, it->second.first, it->second.second.key);
    } else {
      std::map<std::uint32_t, std::uint64_t> pinned_addresses;
      for (const auto& [slot, entry] : live) {
        if (entry.second.pins > 0) pinned_addresses[slot] = pool.address(entry.first);
      }
      const unsigned kind = random() % 3;
      CompactionReport report;
      if (kind == 0) {
        report = pool.compact();
      } else if (kind == 1) {
        report = pool.compact({.max_bytes_moved = random() % (1_MiB)});
      } else {
        report = pool.compact({.goal = CompactGoal::hole, .hole_bytes = 1 + random() % 2_MiB});
      }
      pool.check_invariants();
      for (const auto& [slot, entry] : live) {
        REQUIRE(holds_pattern(pool, entry.first, entry.second.key));
        if (entry.second.pins > 0) REQUIRE(pool.address(entry.first) == pinned_addresses[slot]);
      }
      if (kind == 0 && pool.statistics().pinned_allocations == 0) {
        // Nothing pinned: each segment's free space is its tail, plus padding (under 4 KiB, the
        // largest alignment used here) in front of 4 KiB-aligned blocks. With one segment and no
        // padding, fragmentation is exactly 0.
        const auto map = pool.block_map();
        bool padding = false;
        for (std::size_t i = 0; i + 1 < map.size(); ++i) {
          if (map[i].state == BlockState::free && map[i + 1].segment == map[i].segment) {
            REQUIRE(map[i].bytes < 4096);
            REQUIRE((map[i + 1].offset % 4096) == 0);
            padding = true;
          }
        }
        if (!padding && pool.statistics().segments == 1) {
          REQUIRE(pool.statistics().fragmentation() == 0.0);
          REQUIRE(report.fragmentation_after == 0.0);
        }
      }
    }
  }
  for (auto& [slot, entry] : live) {
    REQUIRE(holds_pattern(pool, entry.first, entry.second.key));
    while (entry.second.pins-- > 0) pool.unpin(entry.first);
    pool.free(entry.first);
  }
  pool.check_invariants();
}


}  // namespace vramkit_test
