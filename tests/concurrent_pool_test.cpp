// ConcurrentPool: shards, home shards per thread, fallback, routing, compaction and statistics.
#include <catch2/catch.hpp>

#include <atomic>
#include <random>
#include <thread>

#include <vramkit/concurrent_pool.hpp>
#include <vramkit/device_buffer.hpp>
#include <vramkit/host_device.hpp>
#include <vramkit/units.hpp>

#include "support/forwarding_device.hpp"
#include "support/patterns.hpp"

using namespace vramkit;
using vramkit_test::holds_pattern;
using vramkit_test::write_pattern;

TEST_CASE("a concurrent pool splits its capacity over its shards", "[concurrent]") {
  ConcurrentPool pool({.pool = {.capacity_bytes = 8_MiB}, .shards = 4}, make_host_device());
  CHECK(pool.shard_count() == 4);
  for (std::size_t i = 0; i < 4; ++i) CHECK(pool.shard(i).statistics().reserved_bytes == 2_MiB);
  CHECK(pool.statistics().reserved_bytes == 8_MiB);
  CHECK_THROWS_AS(ConcurrentPool({.pool = {.capacity_bytes = 1024}, .shards = 8}, make_host_device()),
                  vramkit::invalid_argument);
}

TEST_CASE("a capacity fraction is taken of the free memory once and split evenly over the shards",
          "[concurrent]") {
  auto device = make_host_device({.capacity_bytes = 64_MiB});
  ConcurrentPool pool({.pool = {.capacity_fraction = 0.5}, .shards = 8}, device);
  for (std::size_t i = 0; i < 8; ++i) CHECK(pool.shard(i).statistics().reserved_bytes == 4_MiB);
  CHECK(pool.statistics().reserved_bytes == 32_MiB);  // as one Pool with the same fraction would take
  CHECK_THROWS_WITH(ConcurrentPool({.pool = {.capacity_fraction = 1.5}, .shards = 2}, device),
                    Catch::Contains("1.5"));
}

TEST_CASE("threads get different home shards and handles route to their owner from any thread", "[concurrent]") {
  ConcurrentPool pool({.pool = {.capacity_bytes = 8_MiB}, .shards = 4}, make_host_device());
  std::vector<Handle> handles(4);
  std::vector<Pool*> homes(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      homes[t] = &pool.local();
      handles[t] = pool.allocate(100_KiB);
      write_pattern(pool.owner(handles[t]), handles[t], 10 + t);
    });
  }
  for (auto& thread : threads) thread.join();
  std::sort(homes.begin(), homes.end());
  CHECK(std::unique(homes.begin(), homes.end()) == homes.end());  // round robin: four distinct shards
  for (int t = 0; t < 4; ++t) {
    CHECK(pool.owner(handles[t]).owns(handles[t]));
    CHECK(holds_pattern(pool.owner(handles[t]), handles[t], 10 + t));
    pool.free(handles[t]);  // freed from this thread, not the allocating one
  }
  CHECK(pool.statistics().live_allocations == 0);
  CHECK_THROWS_AS(pool.free(handles[0]), invalid_handle);  // stale now
}

TEST_CASE("a full home shard falls back to another shard, and the request counts once", "[concurrent]") {
  ConcurrentPool pool({.pool = {.capacity_bytes = 4_MiB, .compact_on_failure = false}, .shards = 2},
                      make_host_device());
  Pool& home = pool.local();
  const Handle first = pool.allocate(1536_KiB);
  CHECK(home.owns(first));
  const Handle second = pool.allocate(1536_KiB);  // the home shard (2 MiB) has 512 KiB left
  CHECK_FALSE(home.owns(second));
  const auto statistics = pool.statistics();
  CHECK(statistics.allocation_requests == 2);
  CHECK(statistics.allocation_failures == 0);
  CHECK(statistics.success_rate() == 1.0);
  CHECK_THROWS_WITH(pool.allocate(1536_KiB), Catch::Contains("none of the 2 shards"));
  CHECK(pool.statistics().allocation_requests == 3);
  CHECK(pool.statistics().allocation_failures == 1);
  CHECK_THROWS_AS(pool.allocate(3_MiB), out_of_memory);  // larger than any shard can ever hold
}

TEST_CASE("an incremental compaction of a concurrent pool honours one byte budget over all shards",
          "[concurrent][compaction]") {
  ConcurrentPool pool({.pool = {.capacity_bytes = 8_MiB}, .shards = 4}, make_host_device());
  for (std::size_t index = 0; index < pool.shard_count(); ++index) {
    Pool& shard = pool.shard(index);
    std::vector<Handle> handles;
    for (int i = 0; i < 16; ++i) handles.push_back(shard.allocate(64_KiB));
    for (int i = 0; i < 16; i += 2) shard.free(handles[i]);
  }
  const CompactionReport report = pool.compact({.max_bytes_moved = 200_KiB});
  CHECK(report.bytes_moved > 0);
  CHECK(report.bytes_moved <= 200_KiB);
}

TEST_CASE("growth never adds a segment smaller than the request", "[concurrent][segments]") {
  // 3 MiB + 100 bytes of growth limit over 2 shards: each shard's room is not a granule multiple.
  ConcurrentPool pool({.pool = {.capacity_bytes = 1_MiB, .max_capacity_bytes = 3_MiB + 100,
                                .compact_on_failure = false},
                       .shards = 2},
                      make_host_device());
  Pool& shard = pool.shard(0);
  const Handle first = shard.allocate(512_KiB);
  const std::uint64_t room = shard.options().max_capacity_bytes - shard.statistics().reserved_bytes;
  CHECK_THROWS_AS(shard.allocate(room), out_of_memory);  // would need a segment of `room` bytes
  CHECK(shard.statistics().segments == 1);               // and none was added in vain
  shard.free(first);
}

TEST_CASE("handles of no shard are refused with invalid_handle", "[concurrent][errors]") {
  ConcurrentPool pool({.pool = {.capacity_bytes = 4_MiB}, .shards = 2}, make_host_device());
  Pool other({.capacity_bytes = 1_MiB}, make_host_device());
  CHECK_THROWS_WITH(pool.owner(other.allocate(256)), Catch::Contains("not to any of the 2 shards"));
  CHECK_THROWS_WITH(pool.owner(Handle{}), Catch::Contains("empty handle"));
}

TEST_CASE("compacting a concurrent pool compacts every shard and keeps every byte", "[concurrent][compaction]") {
  ConcurrentPool pool({.pool = {.capacity_bytes = 8_MiB}, .shards = 4}, make_host_device({.shuffle_seed = 3}));
  std::vector<std::pair<Handle, int>> kept;
  std::vector<std::thread> threads;
  std::mutex kept_mutex;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::vector<Handle> mine;
      for (int i = 0; i < 40; ++i) mine.push_back(pool.allocate(5_KiB + 1_KiB * (i % 9)));
      for (int i = 0; i < 40; ++i) {
        if (i % 2 == 0) {
          pool.free(mine[i]);
        } else {
          write_pattern(pool.owner(mine[i]), mine[i], t * 100 + i);
          std::lock_guard lock(kept_mutex);
          kept.emplace_back(mine[i], t * 100 + i);
        }
      }
    });
  }
  for (auto& thread : threads) thread.join();
  REQUIRE(pool.statistics().fragmentation() > 0.0);
  const CompactionReport report = pool.compact();
  CHECK(report.blocks_moved > 0);
  for (std::size_t i = 0; i < pool.shard_count(); ++i) {
    CHECK(pool.shard(i).statistics().free_ranges == 1);
    pool.shard(i).check_invariants();
  }
  for (const auto& [handle, key] : kept) CHECK(holds_pattern(pool.owner(handle), handle, key));
}

TEST_CASE("threads churning a concurrent pool while another compacts lose no byte", "[concurrent][threads]") {
  ConcurrentPool pool({.pool = {.capacity_bytes = 32_MiB}, .shards = 4}, make_host_device());
  std::atomic<bool> done{false};
  std::atomic<int> errors{0};
  std::thread compactor([&] {
    while (!done) pool.compact();
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(static_cast<unsigned>(t));
      std::vector<std::pair<Handle, int>> mine;
      for (int step = 0; step < 1000; ++step) {
        if (mine.size() < 16 && random() % 3 != 0) {
          const Handle handle = pool.allocate(256 + random() % 30000);
          write_pattern(pool.owner(handle), handle, t * 10000 + step);
          mine.emplace_back(handle, t * 10000 + step);
        } else if (!mine.empty()) {
          const auto [handle, key] = mine.back();
          if (!holds_pattern(pool.owner(handle), handle, key)) ++errors;
          pool.free(handle);
          mine.pop_back();
        }
      }
      for (const auto& [handle, key] : mine) {
        if (!holds_pattern(pool.owner(handle), handle, key)) ++errors;
        pool.free(handle);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  done = true;
  compactor.join();
  CHECK(errors == 0);
  CHECK(pool.statistics().live_allocations == 0);
  for (std::size_t i = 0; i < pool.shard_count(); ++i) pool.shard(i).check_invariants();
}

TEST_CASE("DeviceBuffers built on the home shard work like any pool's", "[concurrent][buffers]") {
  ConcurrentPool pool({.pool = {.capacity_bytes = 4_MiB}, .shards = 2}, make_host_device());
  std::vector<int> values(1000, 7);
  DeviceBuffer<int> buffer(pool.local(), values);
  CHECK(buffer.to_vector() == values);
  CHECK(pool.statistics().live_allocations == 1);
}

TEST_CASE("a thread that uses many pools one after another remembers home shards only of those alive",
          "[concurrent]") {
  auto device = make_host_device();
  ConcurrentPool kept({.pool = {.capacity_bytes = 4_MiB}, .shards = 2}, device);
  kept.free(kept.allocate(1_KiB));
  const std::size_t before = ConcurrentPool::remembered_homes();
  for (int i = 0; i < 200; ++i) {
    ConcurrentPool pool({.pool = {.capacity_bytes = 4_MiB}, .shards = 2}, device);
    pool.free(pool.allocate(1_KiB));
    CHECK(ConcurrentPool::remembered_homes() <= before + 1);
  }
  // The kept pool's home is still known: the thread keeps allocating there.
  Pool& home = kept.local();
  CHECK(&kept.local() == &home);
  CHECK(ConcurrentPool::remembered_homes() <= before + 1);
}

TEST_CASE("preparing a concurrent pool for compaction prepares every shard for its own live blocks", "[concurrent]") {
  // The shards share one device: each asks it once for the room of its own live blocks and bytes.
  class Recorder final : public vramkit_test::ForwardingDevice {
   public:
    std::vector<std::pair<std::size_t, std::uint64_t>> asked;
    void reserve_moves(std::size_t moves, std::uint64_t bytes, bool) override { asked.emplace_back(moves, bytes); }
  };
  auto device = std::make_shared<Recorder>();
  ConcurrentPool pool({.pool = {.capacity_bytes = 8_MiB}, .shards = 3}, device);
  std::vector<Handle> handles;
  for (std::size_t shard = 0; shard < 3; ++shard)
    for (std::size_t i = 0; i <= shard; ++i) handles.push_back(pool.shard(shard).allocate(4_KiB * (shard + 1)));
  pool.prepare_compaction();
  REQUIRE(device->asked.size() == 3);
  for (std::size_t shard = 0; shard < 3; ++shard) {
    INFO("shard " << shard);
    CHECK(device->asked[shard].first == shard + 1);
    CHECK(device->asked[shard].second == (shard + 1) * (shard + 1) * 4_KiB);
  }
  for (Handle handle : handles) pool.free(handle);
}
