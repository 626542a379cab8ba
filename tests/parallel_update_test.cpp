// A compaction's update split over threads: WorkerTeam runs each part once, Heap::rebuild_in_parts
// makes exactly the heap that rebuild makes (nodes, ids, free lists, errors), and a pool updated
// by several threads keeps every byte and the same layout as one updated by the calling thread.
#include <catch2/catch.hpp>

#include <atomic>
#include <iostream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <vramkit/errors.hpp>
#include <vramkit/heap.hpp>
#include <vramkit/host_device.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/units.hpp>

#include "pool/worker_team.hpp"
#include "support/patterns.hpp"
#include "support/pool_fixtures.hpp"

using namespace vramkit;

TEST_CASE("a worker team runs every part once a run, each on its own thread", "[parallel][threads]") {
  WorkerTeam team(5);
  REQUIRE(team.size() == 5);
  for (int run = 0; run < 200; ++run) {
    std::vector<std::atomic<int>> calls(5);
    std::vector<std::thread::id> threads(5);
    team.run([&](unsigned part) noexcept {
      calls[part].fetch_add(1);
      threads[part] = std::this_thread::get_id();
    });
    for (auto& count : calls) REQUIRE(count.load() == 1);
    CHECK(threads[0] == std::this_thread::get_id());
    CHECK(std::set<std::thread::id>(threads.begin(), threads.end()).size() == 5);
  }
  WorkerTeam alone(1);
  alone.wake();  // no threads to wake
  int parts = 0;
  alone.run([&](unsigned part) noexcept { parts += 1 + static_cast<int>(part); });
  CHECK(parts == 1);
}

TEST_CASE("a worker team woken ahead of its runs still runs every part once a run", "[parallel][threads]") {
  WorkerTeam team(4);
  for (int run = 0; run < 40; ++run) {
    // Asleep (past spin_time) or spinning when woken; woken once, twice or not at all; the run at
    // once, or after the threads have spun out and slept again.
    if (run % 2 == 0) std::this_thread::sleep_for(WorkerTeam::spin_time * 3);
    for (int wakes = 0; wakes < run % 3; ++wakes) team.wake();
    if (run % 5 == 0) std::this_thread::sleep_for(WorkerTeam::spin_time * 3);
    std::vector<std::atomic<int>> calls(4);
    team.run([&](unsigned part) noexcept { calls[part].fetch_add(1); });
    for (auto& count : calls) REQUIRE(count.load() == 1);
  }
  team.wake();  // and stopped while woken
}

namespace {

using Snapshot = std::vector<std::tuple<BlockId, std::uint64_t, std::uint64_t, bool, std::uint32_t>>;

Snapshot snapshot(const Heap& heap) {
  Snapshot blocks;
  heap.for_each_block([&](const HeapBlock& block) {
    blocks.emplace_back(block.id, block.offset, block.bytes, block.free, block.free ? 0 : block.tag);
  });
  return blocks;
}

/// A heap after random allocations and frees, its node storage scattered.
Heap churned_heap(std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  return vramkit_test::churned_heap(rng, 3000);
}

/// Sorted, disjoint, granular placements; some packed, some apart; ending at the capacity or not.
std::vector<HeapPlacement> random_placements(std::mt19937_64& rng, std::uint64_t capacity) {
  std::vector<HeapPlacement> placements;
  const std::size_t count = rng() % 5000;
  std::uint64_t cursor = rng() % 2 == 0 ? 0 : 256 * (rng() % 4);
  for (std::uint32_t tag = 0; tag < count; ++tag) {
    const std::uint64_t bytes = 256 * (1 + rng() % 16);
    if (cursor + bytes > capacity) break;
    placements.push_back({cursor, bytes, tag});
    cursor += bytes;
    if (rng() % 4 == 0) cursor += 256 * (1 + rng() % 8);  // a free block before the next
  }
  if (rng() % 3 == 0 && cursor < capacity) placements.push_back({cursor, capacity - cursor, 999999});  // to the end
  return placements;
}

/// Calls each part in reverse order on this thread: any order must give the same heap.
void serially_backwards(unsigned parts, const auto& task) {
  for (unsigned part = parts; part-- > 0;) task(part);
}

}  // namespace

TEST_CASE("a rebuild in parts makes exactly the heap a rebuild makes", "[parallel][heap][threads]") {
  const std::uint64_t seed = std::random_device{}();
  std::cout << "rebuild in parts: seed " << seed << "\n";
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  WorkerTeam team(4);
  for (int round = 0; round < 40; ++round) {
    const auto placements = random_placements(rng, 64_MiB);
    const unsigned parts = round % 4 == 0 ? Heap::max_rebuild_parts : static_cast<unsigned>(1 + rng() % 7);
    INFO("round " << round << ", " << placements.size() << " placements in " << parts << " parts");
    Heap serial = churned_heap(seed + round), in_parts = churned_heap(seed + round);
    std::vector<BlockId> serial_ids, part_ids{7, 7, 7};
    serial.rebuild(placements, serial_ids);
    if (parts <= team.size()) {
      in_parts.rebuild_in_parts(placements, part_ids, parts, [&](auto&& task) {
        team.run([&](unsigned part) noexcept {
          if (part < parts) task(part);
        });
      });
    } else {
      in_parts.rebuild_in_parts(placements, part_ids, parts, [&](auto&& task) { serially_backwards(parts, task); });
    }
    in_parts.check_invariants();
    REQUIRE(part_ids == serial_ids);
    REQUIRE(snapshot(in_parts) == snapshot(serial));
    const HeapStatistics a = serial.statistics(), b = in_parts.statistics();
    CHECK(std::tie(a.free_bytes, a.free_ranges, a.allocated_blocks, a.largest_free_block, a.sum_of_squared_free) ==
          std::tie(b.free_bytes, b.free_ranges, b.allocated_blocks, b.largest_free_block, b.sum_of_squared_free));
    // The same free lists: the same requests land in the same places.
    for (std::uint32_t step = 0; step < 300; ++step) {
      const std::uint64_t bytes = 256 * (1 + rng() % 24);
      const auto x = serial.allocate(bytes, 256, step);
      const auto y = in_parts.allocate(bytes, 256, step);
      REQUIRE(x.has_value() == y.has_value());
      if (x) REQUIRE(std::tie(x->block, x->offset, x->bytes) == std::tie(y->block, y->offset, y->bytes));
    }
    in_parts.check_invariants();
  }
}

TEST_CASE("a rebuild in parts refuses what a rebuild refuses, with the same error, changing nothing",
          "[parallel][heap][threads]") {
  Heap heap = churned_heap(3);
  const Snapshot before = snapshot(heap);
  std::vector<HeapPlacement> placements;
  for (std::uint32_t tag = 0; tag < 1000; ++tag) placements.push_back({512ull * tag, 512, tag});
  placements[900].offset += 256;  // overlaps the next: found by the last of four parts
  placements[300].bytes = 100;    // off the granularity: found first, by the second part
  std::string serial_error, parts_error;
  try {
    Heap copy = churned_heap(3);
    copy.rebuild(placements);
  } catch (const std::logic_error& error) {
    serial_error = error.what();
  }
  std::vector<BlockId> ids;
  try {
    heap.rebuild_in_parts(placements, ids, 4, [](auto&& task) { serially_backwards(4, task); });
  } catch (const std::logic_error& error) {
    parts_error = error.what();
  }
  CHECK_FALSE(serial_error.empty());
  CHECK(parts_error == serial_error);
  CHECK(parts_error.find("at 153600 of 100 bytes") != std::string::npos);
  CHECK(snapshot(heap) == before);
  heap.check_invariants();
  for (unsigned parts : {0u, Heap::max_rebuild_parts + 1}) {
    CHECK_THROWS_WITH(heap.rebuild_in_parts(placements, ids, parts, [](auto&&) {}),
                      Catch::Contains(std::to_string(parts) + " parts; 1 to 64"));
  }
  CHECK(snapshot(heap) == before);
}

TEST_CASE("a pool refuses more compaction threads than parts a rebuild can have", "[parallel][pool]") {
  CHECK_THROWS_WITH(Pool({.capacity_bytes = 1_MiB, .compaction_threads = 65}, make_host_device()),
                    Catch::Contains("compaction_threads 65 is above the limit 64"));
  CHECK_NOTHROW(Pool({.capacity_bytes = 1_MiB, .compaction_threads = 64}, make_host_device()));
}

namespace {

using Map = vramkit_test::BlockMap;
using vramkit_test::map_of;

struct Compacted {
  Map map;
  std::vector<CompactionReport> reports;
};

/// Three segments of 256 and 512-byte blocks, every other one freed (about 21,000 blocks kept in
/// each of the first two: above PoolOptions::parallel_update_min_blocks), a few pinned (so that blocks
/// move into gaps before them), compacted full, then for a hole; every byte checked after each.
Compacted compact_many(unsigned threads, std::uint64_t seed) {
  Pool pool({.capacity_bytes = 16_MiB, .max_capacity_bytes = 48_MiB, .compaction_threads = threads},
            make_host_device({.shuffle_seed = seed | 1}));
  std::mt19937_64 rng(seed);
  std::vector<Handle> handles;
  for (int i = 0; i < 100000; ++i) handles.push_back(pool.allocate(256 * (1 + rng() % 2)));
  std::vector<Handle> kept;
  std::vector<std::uint64_t> keys;
  for (std::size_t i = 0; i < handles.size(); ++i) {
    if (i % 2 == 0) {
      pool.free(handles[i]);
    } else {
      kept.push_back(handles[i]);
      keys.push_back(i);
      vramkit_test::write_pattern(pool, handles[i], i);
    }
  }
  std::vector<Handle> pinned;
  for (std::size_t i = 5000; i < kept.size(); i += 9000) {
    pool.pin(kept[i]);
    pinned.push_back(kept[i]);
  }
  Compacted result;
  auto check_all = [&] {
    pool.check_invariants();
    for (std::size_t i = 0; i < kept.size(); ++i) REQUIRE(vramkit_test::holds_pattern(pool, kept[i], keys[i]));
  };
  result.reports.push_back(pool.compact());
  check_all();
  for (Handle handle : pinned) pool.unpin(handle);
  for (std::size_t i = 0; i < kept.size(); i += 7) pool.free(kept[i]), kept[i] = Handle{};
  std::vector<Handle> still;
  std::vector<std::uint64_t> still_keys;
  for (std::size_t i = 0; i < kept.size(); ++i) {
    if (kept[i] != Handle{}) still.push_back(kept[i]), still_keys.push_back(keys[i]);
  }
  kept.swap(still);
  keys.swap(still_keys);
  result.reports.push_back(pool.compact({.goal = CompactGoal::hole, .hole_bytes = 256_KiB}));
  check_all();
  result.reports.push_back(pool.compact());
  check_all();
  CHECK(pool.statistics().fragmentation() == 0.0);
  result.map = map_of(pool);
  return result;
}

}  // namespace

TEST_CASE("a pool whose update several threads share keeps every byte and lays out as one thread does",
          "[parallel][compaction][threads]") {
  const std::uint64_t seed = std::random_device{}();
  std::cout << "parallel pool update: seed " << seed << "\n";
  INFO("seed " << seed);
  const Compacted one = compact_many(1, seed);
  const Compacted four = compact_many(4, seed);
  REQUIRE(one.reports.size() == four.reports.size());
  for (std::size_t index = 0; index < one.reports.size(); ++index) {
    INFO("compaction " << index);
    CHECK(one.reports[index].update_threads == 1);
    CHECK(std::tie(one.reports[index].blocks_moved, one.reports[index].bytes_moved,
                   one.reports[index].largest_free_after, one.reports[index].segments_released) ==
          std::tie(four.reports[index].blocks_moved, four.reports[index].bytes_moved,
                   four.reports[index].largest_free_after, four.reports[index].segments_released));
  }
  CHECK(four.reports[0].update_threads == 4);
  CHECK(one.map == four.map);
}

TEST_CASE("a compaction that a device fault stops part way keeps every byte when threads share the update",
          "[parallel][compaction][faults][threads]") {
  // 40,000 kept blocks in one segment, compacted in parts; the host device fails the k-th move or
  // part. The update made ahead (as if every move completes) is undone and the completed moves are
  // applied, both split over the team: the layout must be the one a single thread makes. A byte
  // budget keeps compactor::FullPlanner, whose parts are the same whatever the threads (without
  // one, the team writes the plan: tests/slide_write_test.cpp).
  const std::uint64_t seed = std::random_device{}();
  std::cout << "parallel update after a fault: seed " << seed << "\n";
  INFO("seed " << seed);
  for (const HostFaults faults : {HostFaults{.move_at = 1}, HostFaults{.move_at = 9000}, HostFaults{.part_at = 2},
                                  HostFaults{.part_at = 4}}) {
    INFO("move_at " << faults.move_at << ", part_at " << faults.part_at);
    std::vector<Map> maps;
    for (unsigned threads : {1u, 4u}) {
      auto device = std::make_shared<HostDevice>(HostDeviceOptions{.faults = faults, .shuffle_seed = seed | 1});
      Pool pool({.capacity_bytes = 32_MiB, .compaction_parts = CompactionParts::always, .free_cache_bytes = 0,
                 .compaction_threads = threads},
                device);
      const std::vector<Handle> kept = vramkit_test::keep_every_other(pool, 80000, seed);
      std::string error;
      try {
        pool.compact({.max_bytes_moved = 1024_GiB});
      } catch (const device_error& failure) {
        error = failure.what();
      }
      CHECK_THAT(error, Catch::Contains("injected"));
      pool.check_invariants();
      for (std::size_t i = 0; i < kept.size(); ++i) REQUIRE(vramkit_test::holds_pattern(pool, kept[i], 2 * i + 1));
      maps.push_back(map_of(pool));
      device->set_faults({});
      const CompactionReport report = pool.compact({.max_bytes_moved = 1024_GiB});  // the same planner again
      CHECK(report.update_threads == threads);
      pool.check_invariants();
      for (std::size_t i = 0; i < kept.size(); ++i) REQUIRE(vramkit_test::holds_pattern(pool, kept[i], 2 * i + 1));
      CHECK(pool.statistics().fragmentation() == 0.0);
    }
    CHECK(maps[0] == maps[1]);
  }
}
