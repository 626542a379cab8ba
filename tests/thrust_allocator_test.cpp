// thrust_allocator on the host device: what a thrust::device_vector relies on (allocate, deallocate,
// pinning for life, statistics, equality), without a GPU. tests/gpu/thrust_test.cu runs device_vector.
#include <catch2/catch.hpp>

#include <cstdint>
#include <numeric>

#include <vramkit/host_device.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/thrust_allocator.hpp>
#include <vramkit/units.hpp>

using namespace vramkit;

namespace {
Pool host_pool(std::uint64_t capacity = 1_MiB) {
  return Pool({.capacity_bytes = capacity}, make_host_device({.shuffle_seed = 3}));
}
}  // namespace

TEST_CASE("thrust_allocator draws pinned, aligned blocks from the pool and deallocate frees them",
          "[thrust_allocator]") {
  Pool pool = host_pool();
  thrust_allocator<double> allocator(pool);
  thrust_allocator<double>::pointer block = allocator.allocate(1000);
  REQUIRE(block.get() != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(block.get()) % 256 == 0);
  PoolStatistics statistics = pool.statistics();
  CHECK(statistics.live_allocations == 1);
  CHECK(statistics.pinned_allocations == 1);
  CHECK(statistics.requested_bytes == 1000 * sizeof(double));
  allocator.deallocate(block, 1000);
  statistics = pool.statistics();
  CHECK(statistics.live_allocations == 0);
  CHECK(statistics.pinned_allocations == 0);
  CHECK(statistics.used_bytes == 0);
  pool.check_invariants();
}

TEST_CASE("thrust_allocator's blocks keep their address and bytes while compaction moves other buffers",
          "[thrust_allocator][compaction]") {
  Pool pool = host_pool();
  const Handle hole = pool.allocate(64_KiB);
  const Handle movable = pool.allocate(64_KiB);
  thrust_allocator<std::uint32_t> allocator(pool);
  auto block = allocator.allocate(4096);
  // The host device's memory is host RAM: the pointer can be written directly.
  std::iota(block.get(), block.get() + 4096, 7u);
  const std::uint64_t movable_before = pool.address(movable);
  pool.free(hole);
  const CompactionReport report = pool.compact();
  CHECK(report.blocks_moved >= 1);
  CHECK(pool.address(movable) != movable_before);
  std::uint32_t expected = 7;
  bool intact = true;
  for (std::uint32_t i = 0; i < 4096; ++i) intact = intact && block.get()[i] == expected++;
  CHECK(intact);
  allocator.deallocate(block, 4096);
  pool.free(movable);
  pool.check_invariants();
}

TEST_CASE("thrust_allocators compare equal exactly when they share a pool, and release each other's memory",
          "[thrust_allocator]") {
  Pool pool = host_pool(), other_pool = host_pool();
  thrust_allocator<int> ints(pool);
  thrust_allocator<float> floats(ints);  // rebound copy
  thrust_allocator<int> foreign(other_pool);
  CHECK(ints == floats);
  CHECK(ints != foreign);
  CHECK(&floats.pool() == &pool);
  static_assert(std::is_same_v<thrust_allocator<int>::rebind<float>::other, thrust_allocator<float>>);

  auto block = thrust_allocator<float>(pool).allocate(10);
  floats.deallocate(block, 10);  // another allocator over the same pool
  CHECK(pool.statistics().live_allocations == 0);
}

TEST_CASE("thrust_allocator ignores null and foreign pointers on deallocate and takes nothing for 0 elements",
          "[thrust_allocator][errors]") {
  Pool pool = host_pool(), other_pool = host_pool();
  thrust_allocator<int> allocator(pool), foreign(other_pool);
  CHECK(allocator.allocate(0).get() == nullptr);
  CHECK(pool.statistics().allocation_requests == 0);
  auto block = allocator.allocate(16);
  foreign.deallocate(block, 16);  // not other_pool's: ignored
  allocator.deallocate(thrust_allocator<int>::pointer(), 0);
  CHECK(pool.statistics().live_allocations == 1);
  allocator.deallocate(block, 16);
  CHECK(pool.statistics().live_allocations == 0);
}

TEST_CASE("thrust_allocator reports a request larger than the pool as out_of_memory",
          "[thrust_allocator][errors]") {
  Pool pool = host_pool(1_MiB);
  thrust_allocator<std::uint64_t> allocator(pool);
  CHECK_THROWS_AS(allocator.allocate(1_MiB), vramkit::out_of_memory);
  CHECK_THROWS_AS(allocator.allocate(allocator.max_size() + 1), vramkit::invalid_argument);
  CHECK(pool.statistics().live_allocations == 0);
}
