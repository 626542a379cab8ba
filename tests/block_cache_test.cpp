// The pool's one-block cache of the first block freed after an allocation (PoolOptions::free_cache_bytes): a repeated
// size reuses its block, the cache never causes a failure or a compaction, and compaction and
// statistics see the cached space as free.
#include <catch2/catch.hpp>

#include <random>
#include <vector>

#include <vramkit/host_device.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/units.hpp>

#include "support/patterns.hpp"

using namespace vramkit;

namespace {
Pool pool_with_cache(std::uint64_t cache_bytes, std::uint64_t capacity = 1_MiB) {
  return Pool({.capacity_bytes = capacity, .free_cache_bytes = cache_bytes}, make_host_device());
}
}  // namespace

TEST_CASE("the first block freed serves the next request of its size, where the heap would place it elsewhere",
          "[pool][cache]") {
  // x, y, z side by side at 0, 4 KiB and 8 KiB; y then x freed. In the heap they merge into an 8 KiB
  // hole whose start a 4 KiB request fills; cached, y (freed first) serves it.
  for (const bool cached : {false, true}) {
    Pool pool = pool_with_cache(cached ? PoolOptions::automatic_cache : 0);
    const Handle x = pool.allocate(4_KiB), y = pool.allocate(4_KiB), z = pool.allocate(4_KiB);
    const std::uint64_t base = pool.address(x);
    REQUIRE(pool.address(y) == base + 4_KiB);
    REQUIRE(pool.address(z) == base + 8_KiB);
    pool.free(y);
    pool.free(x);
    pool.check_invariants();
    const Handle again = pool.allocate(4_KiB);
    CHECK(pool.address(again) == (cached ? base + 4_KiB : base));
    pool.check_invariants();
  }
}

TEST_CASE("a request of another size returns the cached block to the heap first", "[pool][cache]") {
  // a, b side by side; a freed (cached), then b (to the heap, a 4 KiB hole). An 8 KiB request
  // returns a to the heap first, where it merges with b's hole: the request lands at a's place.
  Pool pool = pool_with_cache(PoolOptions::automatic_cache);
  const Handle a = pool.allocate(4_KiB), b = pool.allocate(4_KiB), fence = pool.allocate(4_KiB);
  const std::uint64_t base = pool.address(a);
  pool.free(a);
  pool.free(b);
  pool.check_invariants();
  const Handle wide = pool.allocate(8_KiB);
  CHECK(pool.address(wide) == base);
  pool.check_invariants();
  (void)fence;
}

TEST_CASE("the cache keeps only blocks of at most free_cache_bytes", "[pool][cache]") {
  // x, y of 16,640 bytes (65 granules) side by side, then a fence; y then x freed. Not cached, they
  // merge into one hole whose start the next request of that size fills; cached, y serves it.
  constexpr std::uint64_t size = 65 * 256;
  for (const std::uint64_t limit : {16_KiB, 32_KiB}) {
    Pool pool = pool_with_cache(limit);
    const Handle x = pool.allocate(size), y = pool.allocate(size), fence = pool.allocate(256);
    const std::uint64_t base = pool.address(x);
    REQUIRE(pool.address(y) == base + size);
    pool.free(y);
    pool.free(x);
    pool.check_invariants();
    const Handle again = pool.allocate(size);
    CHECK(pool.address(again) == (limit >= size ? base + size : base));
    pool.check_invariants();
    (void)fence;
  }
}

TEST_CASE("cached blocks are free space for a request that needs them, with no compaction", "[pool][cache]") {
  Pool pool = pool_with_cache(PoolOptions::automatic_cache);  // half of 1 MiB
  std::vector<Handle> quarters;
  for (int i = 0; i < 4; ++i) quarters.push_back(pool.allocate(256_KiB));
  for (const Handle handle : quarters) pool.free(handle);  // two cached, two merged in the heap
  const Handle whole = pool.allocate(1_MiB);
  CHECK(pool.size(whole) == 1_MiB);
  const PoolStatistics statistics = pool.statistics();
  CHECK(statistics.compactions == 0);
  CHECK(statistics.allocation_failures == 0);
  pool.check_invariants();
}

TEST_CASE("statistics and the memory map count cached blocks as free", "[pool][cache]") {
  Pool pool = pool_with_cache(PoolOptions::automatic_cache);
  const Handle a = pool.allocate(64_KiB);
  const Handle b = pool.allocate(64_KiB);
  pool.free(a);
  const PoolStatistics statistics = pool.statistics();
  CHECK(statistics.used_bytes == 64_KiB);
  CHECK(statistics.free_bytes == 1_MiB - 64_KiB);
  CHECK(statistics.free_ranges == 2);  // the 64 KiB before b and the rest after it
  CHECK(statistics.largest_free_block == 1_MiB - 128_KiB);
  std::uint64_t free_in_map = 0;
  for (const BlockInfo& block : pool.block_map()) {
    if (block.state == BlockState::free) free_in_map += block.bytes;
  }
  CHECK(free_in_map == 1_MiB - 64_KiB);
  pool.free(b);
  CHECK(pool.statistics().largest_free_block == 1_MiB);
}

TEST_CASE("random sizes from a small set, with frees, compactions and checks of every byte", "[pool][cache]") {
  const auto seed = std::random_device{}();
  INFO("seed " << seed);
  std::mt19937 random(seed);
  Pool pool = pool_with_cache(PoolOptions::automatic_cache, 4_MiB);
  const std::uint64_t sizes[] = {256, 1000, 4_KiB, 65_KiB, 300_KiB};
  struct Live {
    Handle handle;
    std::uint32_t id;
  };
  std::vector<Live> live;
  std::uint32_t next_id = 1;
  for (int step = 0; step < 3000; ++step) {
    const auto choice = random() % 10;
    if (choice < 5) {
      const std::uint64_t bytes = sizes[random() % std::size(sizes)];
      try {
        const Handle handle = pool.allocate(bytes);
        vramkit_test::write_pattern(pool, handle, next_id);
        live.push_back({handle, next_id++});
      } catch (const out_of_memory&) {
        // Compaction on failure makes every free byte usable: a failure means too few of them.
        CHECK(pool.statistics().free_bytes < (bytes + 255) / 256 * 256);
      }
    } else if (choice < 9 && !live.empty()) {
      const std::size_t victim = random() % live.size();
      REQUIRE(vramkit_test::holds_pattern(pool, live[victim].handle, live[victim].id));
      pool.free(live[victim].handle);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(victim));
    } else {
      pool.compact();
      CHECK(pool.statistics().fragmentation() == 0.0);
      for (const Live& item : live) REQUIRE(vramkit_test::holds_pattern(pool, item.handle, item.id));
    }
    if (step % 100 == 0) pool.check_invariants();
  }
  pool.check_invariants();
}
