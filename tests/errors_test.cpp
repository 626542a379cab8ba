// Misuse and impossible requests not pinned down elsewhere (docs/errors.md lists every row and the
// test that covers it): each raises its typed error, names the value, and changes nothing.
#include <catch2/catch.hpp>

#include <vramkit/device_buffer.hpp>
#include <vramkit/host_device.hpp>
#include <vramkit/image.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/units.hpp>

#include "support/patterns.hpp"

using namespace vramkit;
using vramkit_test::holds_pattern;
using vramkit_test::write_pattern;

TEST_CASE("a pool without a device, or whose capacity fraction comes to 0 bytes, is an invalid_argument",
          "[errors]") {
  CHECK_THROWS_WITH(Pool({.capacity_bytes = 1_MiB}, nullptr), Catch::Contains("needs a device"));
  auto tiny = make_host_device({.capacity_bytes = 1000});
  CHECK_THROWS_AS(Pool({.capacity_fraction = 0.1}, tiny), vramkit::invalid_argument);
  CHECK_THROWS_WITH(Pool({.capacity_fraction = 0.1}, tiny), Catch::Contains("is 0 bytes"));
}

TEST_CASE("an alignment above 2 MiB is an invalid_argument that changes nothing", "[errors]") {
  Pool pool({.capacity_bytes = 4_MiB}, make_host_device());
  CHECK_THROWS_AS(pool.allocate(64, 4_MiB), vramkit::invalid_argument);
  CHECK_THROWS_WITH(pool.allocate(64, 4_MiB), Catch::Contains("4194304") && Catch::Contains("2097152"));
  CHECK(pool.allocate(64, 2_MiB));
  CHECK(pool.statistics().allocation_requests == 1);
}

TEST_CASE("a pool larger than the device is out_of_memory; growth past the device fails the allocation alone",
          "[errors]") {
  CHECK_THROWS_AS(Pool({.capacity_bytes = 2_MiB}, make_host_device({.capacity_bytes = 1_MiB})),
                  out_of_memory);
  auto device = make_host_device({.capacity_bytes = 3_MiB});
  Pool pool({.capacity_bytes = 2_MiB, .max_capacity_bytes = 8_MiB}, device);
  const Handle kept = pool.allocate(1536_KiB);
  write_pattern(pool, kept, 1);
  CHECK_THROWS_AS(pool.allocate(1536_KiB), out_of_memory);  // a 2 MiB segment needs more than the device has
  CHECK_THROWS_WITH(pool.allocate(1536_KiB), Catch::Contains("1.50 MiB") && Catch::Contains("growth limit"));
  CHECK(pool.statistics().segments == 1);
  CHECK(pool.statistics().allocation_failures == 2);
  CHECK(holds_pattern(pool, kept, 1));
  CHECK(pool.allocate(256_KiB));  // what fits still works
  pool.check_invariants();
}

TEST_CASE("the destructor paths report misuse by returning false, never by throwing", "[errors]") {
  Pool pool({.capacity_bytes = 1_MiB}, make_host_device());
  const Handle handle = pool.allocate(100);
  CHECK_FALSE(pool.unpin_noexcept(handle));  // not pinned
  CHECK_FALSE(pool.unpin_noexcept(Handle{}));
  CHECK(pool.release(handle));
  CHECK_FALSE(pool.release(handle));  // stale
  CHECK_FALSE(pool.release(Handle{}));
  CHECK(pool.statistics().live_allocations == 0);
}

TEST_CASE("a freed handle is refused by every access with invalid_handle", "[errors]") {
  Pool pool({.capacity_bytes = 1_MiB}, make_host_device());
  const Handle handle = pool.allocate(100);
  pool.free(handle);
  std::vector<std::byte> data(10);
  CHECK_THROWS_AS(pool.write(handle, data), invalid_handle);
  CHECK_THROWS_AS(pool.read(handle, data), invalid_handle);
  CHECK_THROWS_AS(pool.fill(handle, std::byte{1}), invalid_handle);
  CHECK_THROWS_AS(pool.unpin(handle), invalid_handle);
  CHECK_THROWS_AS(pool.address(handle), invalid_handle);
  CHECK_FALSE(pool.valid(handle));
  CHECK(pool.statistics().pinned_allocations == 0);  // a refused access leaves no pin behind
}

TEST_CASE("the virtual device refuses data access with state_error; bookkeeping still works", "[errors]") {
  Pool pool({.capacity_bytes = 1_MiB}, make_virtual_device());
  const Handle handle = pool.allocate(1000);
  std::vector<std::byte> data(10);
  CHECK_THROWS_AS(pool.write(handle, data), state_error);
  CHECK_THROWS_WITH(pool.read(handle, data), Catch::Contains("virtual device has no memory"));
  CHECK(pool.statistics().pinned_allocations == 0);
  pool.free(handle);
  pool.check_invariants();
}

TEST_CASE("an image whose size overflows 64 bits or whose row alignment is not a power of two is refused",
          "[errors][buffers]") {
  Pool pool({.capacity_bytes = 1_MiB}, make_host_device());
  CHECK_THROWS_AS(Image<float>(pool, 16, 16, 3), vramkit::invalid_argument);
  CHECK_THROWS_WITH(Image<float>(pool, 1u << 31, 1u << 31), Catch::Contains("overflows"));
  CHECK_THROWS_AS(Image<std::uint64_t>(pool, UINT32_MAX, UINT32_MAX), vramkit::invalid_argument);
  CHECK(pool.statistics().live_allocations == 0);
  CHECK(pool.statistics().allocation_requests == 0);
}

TEST_CASE("a DeviceBuffer of a pool too small is out_of_memory and holds nothing", "[errors][buffers]") {
  Pool pool({.capacity_bytes = 1_MiB}, make_host_device());
  CHECK_THROWS_AS(DeviceBuffer<float>(pool, 1u << 20), out_of_memory);
  CHECK(pool.statistics().live_allocations == 0);
}

TEST_CASE("a chunk plan whose chunks name more moves than given is refused before anything moves", "[errors]") {
  auto device = make_host_device();
  const Region region = device->obtain(64_KiB);
  const std::vector<std::byte> data = vramkit_test::pattern(3, 16_KiB);
  device->fill(region.address, std::byte{0}, region.bytes, nullptr);
  device->copy_from_host(region.address, data.data(), data.size(), nullptr);
  const compactor::CopyRange moves[] = {{region.address, region.address + 32_KiB, 8_KiB},
                                        {region.address + 8_KiB, region.address + 48_KiB, 8_KiB}};
  const compactor::ChunkPlan plan = compactor::make_chunk_plan(moves);
  CHECK_THROWS_WITH(device->execute(plan, 1), Catch::Contains("move 1") && Catch::Contains("one of 1 moves"));
  std::vector<std::byte> after(48_KiB);
  device->copy_to_host(after.data(), region.address, after.size(), nullptr);
  CHECK(std::equal(data.begin(), data.end(), after.begin()));
  CHECK(std::all_of(after.begin() + 32_KiB, after.end(), [](std::byte b) { return b == std::byte{0}; }));
  device->release(region);
}
