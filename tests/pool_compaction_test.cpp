// Pool compaction on the host device: live data survives every move, pins stay, holes appear,
// segments go back, faults lose nothing. The host device runs chunks in a random order that the
// dependency rules allow, so a missing dependency shows up as wrong bytes.
#include <catch2/catch.hpp>

#include <iostream>
#include <map>
#include <random>

#include <vramkit/host_device.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/units.hpp>

#include "support/compaction_property.hpp"
#include "support/patterns.hpp"

using namespace vramkit;
using vramkit_test::holds_pattern;
using vramkit_test::write_pattern;


TEST_CASE("compaction keeps every live byte over random operation sequences (several seeds)",
          "[compaction][random]") {
  const std::uint64_t base = std::random_device{}();
  for (std::uint64_t run = 0; run < 3; ++run) {
    vramkit_test::run_property_test(make_host_device({.shuffle_seed = (base + run) | 1}), base + run, 10000,
                                    2_MiB);
  }
}

TEST_CASE("full compaction with nothing pinned leaves one free range per segment", "[compaction]") {
  Pool pool({.capacity_bytes = 4_MiB}, make_host_device({.shuffle_seed = 11}));
  std::vector<Handle> handles;
  for (int i = 0; i < 64; ++i) handles.push_back(pool.allocate(1000 + 997 * i));
  for (int i = 0; i < 64; i += 2) pool.free(handles[i]);
  for (int i = 1; i < 64; i += 2) write_pattern(pool, handles[i], i);
  REQUIRE(pool.statistics().fragmentation() > 0.3);
  const CompactionReport report = pool.compact();
  CHECK(report.fragmentation_before > 0.3);
  CHECK(report.fragmentation_after == 0.0);
  CHECK(report.blocks_moved > 0);
  CHECK(pool.statistics().free_ranges == 1);
  for (int i = 1; i < 64; i += 2) CHECK(holds_pattern(pool, handles[i], i));
  CHECK(pool.statistics().compactions == 1);
  CHECK(pool.statistics().bytes_moved == report.bytes_moved);
}

TEST_CASE("pinned blocks never move and compaction packs around them", "[compaction]") {
  Pool pool({.capacity_bytes = 1_MiB}, make_host_device({.shuffle_seed = 5}));
  std::vector<Handle> handles;
  for (int i = 0; i < 16; ++i) handles.push_back(pool.allocate(32_KiB));
  for (int i = 0; i < 16; ++i) write_pattern(pool, handles[i], 100 + i);
  const std::uint64_t pinned_address = pool.pin(handles[8]);
  for (int i = 0; i < 8; ++i) pool.free(handles[i]);
  pool.compact();
  CHECK(pool.address(handles[8]) == pinned_address);
  for (int i = 8; i < 16; ++i) CHECK(holds_pattern(pool, handles[i], 100 + i));
  // Blocks after the pin slid into the space before it.
  CHECK(pool.address(handles[9]) < pinned_address);
  pool.unpin(handles[8]);
}

TEST_CASE("an allocation that would fail first compacts a hole and then succeeds", "[compaction]") {
  Pool pool({.capacity_bytes = 1_MiB}, make_host_device());
  std::vector<Handle> handles;
  for (int i = 0; i < 16; ++i) handles.push_back(pool.allocate(64_KiB));
  for (int i = 0; i < 16; i += 2) pool.free(handles[i]);
  for (int i = 1; i < 16; i += 2) write_pattern(pool, handles[i], i);
  REQUIRE(pool.statistics().largest_free_block == 64_KiB);
  const Handle big = pool.allocate(256_KiB);  // 512 KiB free, in 64 KiB pieces
  CHECK(pool.size(big) == 256_KiB);
  CHECK(pool.statistics().compactions == 1);
  CHECK(pool.statistics().bytes_moved <= 256_KiB);  // minimal: no more than the hole's live bytes
  for (int i = 1; i < 16; i += 2) CHECK(holds_pattern(pool, handles[i], i));
  pool.check_invariants();
}

TEST_CASE("with compaction on failure disabled the same request fails", "[compaction]") {
  Pool pool({.capacity_bytes = 1_MiB, .compact_on_failure = false}, make_host_device());
  std::vector<Handle> handles;
  for (int i = 0; i < 16; ++i) handles.push_back(pool.allocate(64_KiB));
  for (int i = 0; i < 16; i += 2) pool.free(handles[i]);
  CHECK_THROWS_AS(pool.allocate(256_KiB), out_of_memory);
}

TEST_CASE("compaction empties trailing segments and gives them back", "[compaction][segments]") {
  auto device = make_host_device();
  Pool pool({.capacity_bytes = 1_MiB, .max_capacity_bytes = 4_MiB, .compact_on_failure = false}, device);
  std::vector<Handle> handles;
  for (int i = 0; i < 24; ++i) handles.push_back(pool.allocate(100_KiB));
  REQUIRE(pool.statistics().segments == 3);
  for (int i = 0; i < 24; ++i) {
    if (i % 3 != 0) pool.free(handles[i]);
  }
  for (int i = 0; i < 24; i += 3) write_pattern(pool, handles[i], i);
  const CompactionReport report = pool.compact();
  CHECK(report.segments_released == 2);
  CHECK(pool.statistics().segments == 1);
  CHECK(pool.statistics().reserved_bytes == 1_MiB);
  CHECK(device->memory_info().total_bytes - device->memory_info().free_bytes == 1_MiB);
  for (int i = 0; i < 24; i += 3) CHECK(holds_pattern(pool, handles[i], i));
  pool.check_invariants();
}

TEST_CASE("a budget bounds what a compaction moves, the evacuation of trailing segments included",
          "[compaction][segments]") {
  // Segment 0 half empty, segment 1 holding one 128 KiB buffer: evacuating it moves 128 KiB.
  auto device = make_host_device();
  Pool pool({.capacity_bytes = 1_MiB, .max_capacity_bytes = 2_MiB, .compact_on_failure = false}, device);
  std::vector<Handle> first;
  for (int i = 0; i < 8; ++i) first.push_back(pool.allocate(128_KiB));
  const Handle second = pool.allocate(128_KiB);
  REQUIRE(pool.statistics().segments == 2);
  for (int i = 1; i < 8; i += 2) pool.free(first[i]);
  write_pattern(pool, second, 77);
  const std::uint64_t budget = GENERATE(std::uint64_t{0}, 64_KiB, 128_KiB + 256, 1_MiB, UINT64_MAX);
  INFO("budget " << budget);
  // Sliding segment 0's buffers down moves 3 x 128 KiB, then the evacuation 128 KiB more.
  const CompactionReport report = pool.compact({.max_bytes_moved = budget});
  CHECK(report.bytes_moved <= budget);
  CHECK(report.segments_released == (budget >= 4 * 128_KiB ? 1u : 0u));
  CHECK(pool.statistics().segments == (budget >= 4 * 128_KiB ? 1u : 2u));
  CHECK(holds_pattern(pool, second, 77));
  pool.check_invariants();
}

TEST_CASE("a move that fails part way loses no data: walk the fault over every move of a compaction",
          "[compaction][faults]") {
  // Count the moves of the fault-free compaction first. In parts (32 of the 40 live blocks, then
  // the rest): a fault in the first leaves the second planned but not run.
  constexpr int blocks = 60;
  auto build = [](std::shared_ptr<HostDevice> device, std::vector<Handle>& handles) {
    auto pool = std::make_unique<Pool>(
        PoolOptions{.capacity_bytes = 2_MiB, .compaction_parts = CompactionParts::always}, device);
    for (int i = 0; i < blocks; ++i) handles.push_back(pool->allocate(7_KiB + 3_KiB * (i % 7)));
    for (int i = 0; i < blocks; i += 3) pool->free(handles[i]);
    for (int i = 0; i < blocks; ++i) {
      if (i % 3 != 0) write_pattern(*pool, handles[i], i);
    }
    return pool;
  };
  std::uint64_t total_moves = 0;
  {
    auto device = make_host_device();
    std::vector<Handle> handles;
    auto pool = build(device, handles);
    device->set_faults({});
    pool->compact();
    total_moves = device->counts().moves;
  }
  REQUIRE(total_moves > 10);
  for (std::uint64_t k = 1; k <= total_moves; ++k) {
    INFO("fault at move " << k);
    auto device = make_host_device();
    std::vector<Handle> handles;
    auto pool = build(device, handles);
    device->set_faults({.move_at = k});
    CHECK_THROWS_AS(pool->compact(), device_error);
    pool->check_invariants();
    for (int i = 0; i < blocks; ++i) {
      if (i % 3 != 0) REQUIRE(holds_pattern(*pool, handles[i], i));
    }
    device->set_faults({});
    pool->compact();  // and the pool keeps working
    CHECK(pool->statistics().fragmentation() == 0.0);
    for (int i = 0; i < blocks; ++i) {
      if (i % 3 != 0) REQUIRE(holds_pattern(*pool, handles[i], i));
    }
  }
}

TEST_CASE("a pool compacting again and again, as its layout grows and shrinks, keeps every byte",
          "[compaction]") {
  // A pool keeps its compaction buffers: each compaction here has more or fewer blocks, segments
  // and pins than the one before, and takes the merge path (full) or the general one (hole).
  Pool pool({.capacity_bytes = 1_MiB,
             .max_capacity_bytes = 4_MiB,
             .segment_bytes = 1_MiB,
             .compact_on_failure = false,
             .compaction_parts = CompactionParts::always},
            make_host_device({.shuffle_seed = 3}));
  std::mt19937_64 rng(17);
  std::map<std::uint64_t, Handle> live;  // key -> handle
  std::uint64_t next_key = 1;
  const std::size_t rounds[] = {40, 400, 10, 250, 1, 120};
  for (std::size_t round = 0; round < std::size(rounds); ++round) {
    INFO("round " << round);
    for (std::size_t i = 0; i < rounds[round]; ++i) {
      try {
        const Handle handle = pool.allocate(256 * (1 + rng() % 24));
        write_pattern(pool, handle, next_key);
        live[next_key++] = handle;
      } catch (const out_of_memory&) {
        break;
      }
    }
    for (auto it = live.begin(); it != live.end();) {  // free about half, in key order
      if (rng() % 2 == 0) {
        pool.free(it->second);
        it = live.erase(it);
      } else {
        ++it;
      }
    }
    const bool pin = round % 2 == 1 && !live.empty();
    if (pin) pool.pin(live.begin()->second);
    if (round == 3) {
      pool.compact({.goal = CompactGoal::hole, .hole_bytes = 8_KiB});
    } else {
      pool.compact({.release_empty_segments = round % 3 == 2});
    }
    if (pin) pool.unpin(live.begin()->second);
    pool.check_invariants();
    for (const auto& [key, handle] : live) REQUIRE(holds_pattern(pool, handle, key));
  }
  CHECK(pool.statistics().compactions == std::size(rounds));
}

TEST_CASE("compaction options are checked", "[compaction][errors]") {
  Pool pool({.capacity_bytes = 1_MiB}, make_host_device());
  CHECK_THROWS_AS(pool.compact({.goal = CompactGoal::hole, .hole_bytes = 0}), vramkit::invalid_argument);
  CHECK_THROWS_AS(pool.compact({.goal = CompactGoal::hole, .hole_bytes = 10, .hole_alignment = 3}),
                  vramkit::invalid_argument);
}
