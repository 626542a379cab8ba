// Pool on the host device: allocation, bad input, pins, copies, statistics, growth, threads.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>

#include <vramkit/device_buffer.hpp>
#include <vramkit/host_device.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/units.hpp>

#include "support/patterns.hpp"

using namespace vramkit;
using vramkit_test::holds_pattern;
using vramkit_test::pattern;
using vramkit_test::write_pattern;

namespace {
Pool host_pool(std::uint64_t capacity, std::uint64_t max_capacity = 0) {
  return Pool({.capacity_bytes = capacity, .max_capacity_bytes = max_capacity}, make_host_device());
}
}  // namespace

TEST_CASE("pool rejects a capacity of 0, a bad fraction, a bad granularity and a maximum below the capacity",
          "[pool][errors]") {
  auto device = make_host_device();
  CHECK_THROWS_AS(Pool({.capacity_bytes = 0}, device), vramkit::invalid_argument);
  CHECK_THROWS_AS(Pool({.capacity_fraction = 1.5}, device), vramkit::invalid_argument);
  CHECK_THROWS_WITH(Pool({.capacity_fraction = -0.1}, device), Catch::Contains("-0.1"));
  CHECK_THROWS_AS(Pool({.capacity_bytes = 1_MiB, .granularity = 8}, device), vramkit::invalid_argument);
  CHECK_THROWS_AS(Pool({.capacity_bytes = 1_MiB, .granularity = 300}, device), vramkit::invalid_argument);
  CHECK_THROWS_AS(Pool({.capacity_bytes = 2_MiB, .max_capacity_bytes = 1_MiB}, device),
                  vramkit::invalid_argument);
  CHECK(device->memory_info().free_bytes == device->memory_info().total_bytes);  // nothing obtained
}

TEST_CASE("pool takes a fraction of the device's free memory", "[pool]") {
  auto device = make_host_device({.capacity_bytes = 64_MiB});
  Pool pool({.capacity_fraction = 0.25}, device);
  CHECK(pool.statistics().reserved_bytes == 16_MiB);
}

TEST_CASE("the largest possible block of a growing pool is the first segment or the growth left beside it",
          "[pool][errors]") {
  auto device = make_host_device();
  {
    Pool pool({.capacity_bytes = 1_MiB, .max_capacity_bytes = 2_MiB}, device);
    CHECK(pool.largest_possible_block() == 1_MiB);  // a second segment gets at most 1 MiB too
    CHECK_THROWS_WITH(pool.allocate(1_MiB + 512_KiB), Catch::Contains("largest possible block is 1 MiB"));
    CHECK(pool.statistics().segments == 1);
    CHECK(pool.statistics().compactions == 0);
  }
  {
    Pool pool({.capacity_bytes = 1_MiB, .max_capacity_bytes = 4_MiB}, device);
    CHECK(pool.largest_possible_block() == 3_MiB);
    const Handle large = pool.allocate(3_MiB);  // the promise holds
    CHECK(pool.statistics().segments == 2);
    pool.free(large);
  }
}

TEST_CASE(
    "allocating 0 bytes, a bad alignment or more than the pool can ever hold is a typed error that changes "
    "nothing",
    "[pool][errors]") {
  Pool pool = host_pool(1_MiB);
  const Handle kept = pool.allocate(1000);
  const auto before = pool.statistics();
  CHECK_THROWS_AS(pool.allocate(0), vramkit::invalid_argument);
  CHECK_THROWS_AS(pool.allocate(64, 3), vramkit::invalid_argument);
  CHECK_THROWS_WITH(pool.allocate(64, 3), Catch::Contains("alignment 3"));
  CHECK_THROWS_AS(pool.allocate(3_GiB), vramkit::out_of_memory);
  CHECK_THROWS_WITH(pool.allocate(3_GiB),
                    Catch::Contains("3 GiB") && Catch::Contains("largest possible block is 1 MiB"));
  CHECK_THROWS_AS(pool.allocate(UINT64_MAX), std::bad_alloc);
  const auto after = pool.statistics();
  CHECK(after.used_bytes == before.used_bytes);
  CHECK(after.live_allocations == before.live_allocations);
  CHECK(pool.valid(kept));
  pool.check_invariants();
}

TEST_CASE("out_of_memory names the request and the pool's statistics", "[pool][errors]") {
  Pool pool = host_pool(1_MiB);
  const Handle a = pool.allocate(600_KiB);
  try {
    (void)pool.allocate(600_KiB);
    FAIL("expected out_of_memory");
  } catch (const out_of_memory& error) {
    const std::string text = error.what();
    CHECK_THAT(text, Catch::Contains("600 KiB") && Catch::Contains("free of 1 MiB") &&
                         Catch::Contains("largest free block"));
  }
  CHECK(pool.statistics().allocation_failures == 1);
  CHECK(pool.statistics().success_rate() == Approx(0.5));
  pool.free(a);
}

TEST_CASE("stale, foreign and empty handles raise invalid_handle and never resolve", "[pool][errors]") {
  Pool pool = host_pool(1_MiB);
  Pool other = host_pool(1_MiB);
  const Handle handle = pool.allocate(256);
  pool.free(handle);
  CHECK_THROWS_AS(pool.free(handle), invalid_handle);
  CHECK_THROWS_WITH(pool.pin(handle), Catch::Contains("stale"));
  const Handle reused = pool.allocate(256);  // likely the same slot, a new generation
  CHECK(reused != handle);
  CHECK_THROWS_AS(pool.size(handle), invalid_handle);
  CHECK(pool.size(reused) == 256);
  const Handle foreign = other.allocate(256);
  CHECK_THROWS_WITH(pool.pin(foreign), Catch::Contains("belongs to pool table"));
  CHECK_THROWS_WITH(pool.free(Handle{}), Catch::Contains("empty handle"));
  CHECK_THROWS_AS(pool.read(Handle{}, {}), invalid_handle);
  CHECK(other.valid(foreign));
}

TEST_CASE("freeing a pinned buffer is a state_error and leaves it live; unpinning an unpinned one too",
          "[pool][errors]") {
  Pool pool = host_pool(1_MiB);
  const Handle handle = pool.allocate(512);
  pool.pin(handle);
  CHECK_THROWS_AS(pool.free(handle), state_error);
  CHECK_THROWS_WITH(pool.free(handle), Catch::Contains("pinned 1 time"));
  CHECK(pool.valid(handle));
  pool.unpin(handle);
  CHECK_THROWS_AS(pool.unpin(handle), state_error);
  pool.free(handle);
  CHECK(pool.statistics().live_allocations == 0);
}

TEST_CASE("a buffer released while pinned is freed by its last unpin, not leaked", "[pool]") {
  Pool pool = host_pool(1_MiB);
  const Handle handle = pool.allocate(512);
  pool.pin(handle);
  pool.pin(handle);
  CHECK(pool.release(handle));  // the destructor path (a DeviceBuffer dying before its Pinned guard)
  CHECK(pool.valid(handle));    // still pinned: the raw pointer stays valid
  pool.unpin(handle);
  CHECK(pool.statistics().live_allocations == 1);
  pool.unpin(handle);  // the last pin frees it
  CHECK_FALSE(pool.valid(handle));
  CHECK(pool.statistics().live_allocations == 0);
  CHECK(pool.statistics().pinned_allocations == 0);
  pool.check_invariants();
  {
    DeviceBuffer<int> buffer(pool, 64);
    Pinned<int> pinned = buffer.pin();
    buffer.reset();
    CHECK(pool.statistics().live_allocations == 1);
  }
  CHECK(pool.statistics().live_allocations == 0);
}

TEST_CASE("write and read round-trip bytes and refuse ranges outside the buffer", "[pool]") {
  Pool pool = host_pool(1_MiB);
  const Handle handle = pool.allocate(1000);
  write_pattern(pool, handle, 42);
  CHECK(holds_pattern(pool, handle, 42));
  std::vector<std::byte> part(10);
  pool.read(handle, part, 990);
  const auto expected = pattern(42, 1000);
  CHECK(part == std::vector<std::byte>(expected.begin() + 990, expected.end()));
  std::vector<std::byte> too_long(11);
  CHECK_THROWS_AS(pool.read(handle, too_long, 990), vramkit::invalid_argument);
  CHECK_THROWS_AS(pool.write(handle, too_long, 995), vramkit::invalid_argument);
  CHECK(holds_pattern(pool, handle, 42));  // the refused write changed nothing
  pool.fill(handle, std::byte{7});
  pool.read(handle, part, 0);
  CHECK(part == std::vector<std::byte>(10, std::byte{7}));
}

TEST_CASE("writing, reading or filling nothing is allowed and changes nothing", "[pool]") {
  // An empty span's data() may be null; the device must not pass it to memcpy (found by fuzzing).
  Pool pool = host_pool(1_MiB);
  const Handle handle = pool.allocate(100);
  write_pattern(pool, handle, 3);
  pool.write(handle, {});
  pool.write(handle, {}, 100);
  pool.read(handle, {}, 100);
  CHECK(holds_pattern(pool, handle, 3));
  CHECK(pool.statistics().pinned_allocations == 0);
}

TEST_CASE("pins return the block's address and nest", "[pool]") {
  Pool pool = host_pool(1_MiB);
  const Handle handle = pool.allocate(256);
  const std::uint64_t address = pool.pin(handle);
  CHECK(pool.pin(handle) == address);
  CHECK(pool.statistics().pinned_allocations == 1);
  pool.unpin(handle);
  CHECK(pool.statistics().pinned_allocations == 1);
  pool.unpin(handle);
  CHECK(pool.statistics().pinned_allocations == 0);
  CHECK(address % 256 == 0);
}

TEST_CASE("statistics follow allocations: used, peak, free ranges, fragmentation, utilization", "[pool]") {
  Pool pool = host_pool(1_MiB);
  std::vector<Handle> handles;
  for (int i = 0; i < 8; ++i) handles.push_back(pool.allocate(64_KiB));
  for (int i = 0; i < 8; i += 2) pool.free(handles[i]);  // 4 holes of 64 KiB + the 512 KiB tail
  const auto statistics = pool.statistics();
  CHECK(statistics.used_bytes == 256_KiB);
  CHECK(statistics.peak_used_bytes == 512_KiB);
  CHECK(statistics.free_ranges == 5);
  CHECK(statistics.largest_free_block == 512_KiB);
  CHECK(statistics.fragmentation() == Approx(1.0 - 512.0 / 768.0));
  CHECK(statistics.utilization() == Approx(0.25));
  CHECK(statistics.allocation_requests == 8);
  CHECK(statistics.success_rate() == 1.0);
  pool.check_invariants();
}

TEST_CASE("pool grows by segments up to its maximum and says so when it cannot", "[pool]") {
  Pool pool({.capacity_bytes = 1_MiB, .max_capacity_bytes = 3_MiB, .compact_on_failure = false},
            make_host_device());
  const Handle a = pool.allocate(768_KiB);
  const Handle b = pool.allocate(768_KiB);  // needs a second segment
  CHECK(pool.statistics().segments == 2);
  CHECK(pool.statistics().reserved_bytes == 2_MiB);
  const Handle c = pool.allocate(900_KiB);
  CHECK(pool.statistics().segments == 3);
  CHECK_THROWS_AS(pool.allocate(900_KiB), out_of_memory);
  pool.free(a);
  pool.free(b);
  pool.free(c);
  pool.check_invariants();
}

TEST_CASE("a failed region request during growth is a device_error that changes nothing", "[pool][faults]") {
  auto device = make_host_device();
  Pool pool({.capacity_bytes = 1_MiB, .max_capacity_bytes = 4_MiB}, device);
  const Handle a = pool.allocate(900_KiB);
  write_pattern(pool, a, 1);
  device->set_faults({.obtain_at = 1});
  const auto before = pool.statistics();
  CHECK_THROWS_AS(pool.allocate(900_KiB), device_error);
  CHECK(pool.statistics().reserved_bytes == before.reserved_bytes);
  CHECK(pool.statistics().live_allocations == 1);
  CHECK(holds_pattern(pool, a, 1));
  CHECK(pool.allocate(900_KiB));  // the next request works
  pool.check_invariants();
}

TEST_CASE("threads allocating, writing, verifying and freeing concurrently never share a block",
          "[pool][threads]") {
  Pool pool = host_pool(64_MiB);
  std::atomic<int> errors{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 random(static_cast<unsigned>(t));
      std::vector<std::pair<Handle, int>> mine;
      for (int step = 0; step < 2000; ++step) {
        if (mine.size() < 20 && random() % 3 != 0) {
          const Handle handle = pool.allocate(256 + random() % 20000);
          const int key = t * 100000 + step;
          write_pattern(pool, handle, key);
          mine.emplace_back(handle, key);
        } else if (!mine.empty()) {
          const auto [handle, key] = mine.back();
          if (!holds_pattern(pool, handle, key)) ++errors;
          pool.free(handle);
          mine.pop_back();
        }
      }
      for (auto [handle, key] : mine) {
        if (!holds_pattern(pool, handle, key)) ++errors;
        pool.free(handle);
      }
    });
  }
  for (auto& thread : threads) thread.join();
  CHECK(errors == 0);
  CHECK(pool.statistics().live_allocations == 0);
  pool.check_invariants();
}
