// cccl_resource: the CCCL concept table (compile time) and its allocate/deallocate semantics on the
// host device (run time). Compiled by the host compiler against CCCL::CCCL.
#include <catch2/catch.hpp>

#include <cstdint>

#include <vramkit/cccl_resource.hpp>
#include <vramkit/host_device.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/units.hpp>

using namespace vramkit;

static_assert(cccl_resource_concept_satisfied);
#if CCCL_VERSION >= 3001000
static_assert(cuda::mr::resource_with<cccl_resource, cuda::mr::device_accessible>);
static_assert(cuda::mr::synchronous_resource_with<cccl_resource, cuda::mr::device_accessible>);
#else
static_assert(cuda::mr::async_resource_with<cccl_resource, cuda::mr::device_accessible>);
static_assert(cuda::mr::async_resource<cccl_resource>);
static_assert(cuda::mr::resource_with<cccl_resource, cuda::mr::device_accessible>);
#endif
static_assert(!cuda::has_property<cccl_resource, cuda::mr::host_accessible>);

TEST_CASE("cccl_resource allocates pinned blocks from its pool and frees them, sync and stream ordered",
          "[cccl_resource]") {
  Pool pool({.capacity_bytes = 1_MiB}, make_host_device());
  cccl_resource resource(pool);
  const cuda::stream_ref stream(cudaStream_t{});
  void* sync_block = resource.allocate(1000, 512);
  void* async_block = resource.allocate_async(2000, 256, stream);
  REQUIRE(sync_block != nullptr);
  REQUIRE(async_block != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(sync_block) % 512 == 0);
  CHECK(pool.statistics().live_allocations == 2);
  CHECK(pool.statistics().pinned_allocations == 2);
  CHECK(pool.statistics().requested_bytes == 3000);
  resource.deallocate_async(async_block, 2000, 256, stream);
  resource.deallocate(sync_block, 1000, 512);
  CHECK(pool.statistics().live_allocations == 0);
  pool.check_invariants();
}

TEST_CASE("cccl_resources are equal exactly when they share a pool and ignore foreign pointers",
          "[cccl_resource]") {
  Pool pool({.capacity_bytes = 1_MiB}, make_host_device());
  Pool other_pool({.capacity_bytes = 1_MiB}, make_host_device());
  cccl_resource resource(pool), same(pool), other(other_pool);
  CHECK(resource == same);
  CHECK(resource != other);
  void* block = resource.allocate(64);
  other.deallocate(block, 64);  // not other_pool's: ignored
  CHECK(pool.statistics().live_allocations == 1);
  same.deallocate(block, 64);
  CHECK(pool.statistics().live_allocations == 0);
  CHECK_THROWS_AS(resource.allocate(2_MiB), vramkit::out_of_memory);
}
