// thrust::device_vector over a vramkit pool on the CUDA device: Thrust's kernels fill and reduce it,
// and compaction moves the pool's other buffers but never the vector (its block is pinned for life).
#include <catch2/catch.hpp>

#include <cstdint>

#include <thrust/device_vector.h>
#include <thrust/execution_policy.h>
#include <thrust/reduce.h>
#include <thrust/sequence.h>

#include <vramkit/pool.hpp>
#include <vramkit/thrust_allocator.hpp>
#include <vramkit/units.hpp>

using namespace vramkit;

TEST_CASE("a thrust::device_vector from the pool fills, reduces and stays put through compaction",
          "[gpu][thrust]") {
  Pool pool({.capacity_bytes = 64_MiB}, make_cuda_device());
  const Handle hole = pool.allocate(1_MiB);
  const Handle movable = pool.allocate(1_MiB);
  const std::uint64_t count = 1 << 20;
  using Vector = thrust::device_vector<std::uint64_t, thrust_allocator<std::uint64_t>>;
  {
    Vector values(count, std::uint64_t{0}, thrust_allocator<std::uint64_t>(pool));
    CHECK(pool.statistics().pinned_allocations == 1);
    thrust::sequence(values.begin(), values.end(), std::uint64_t{1});
    const auto* before = thrust::raw_pointer_cast(values.data());
    const std::uint64_t movable_before = pool.address(movable);

    pool.free(hole);
    const CompactionReport report = pool.compact();
    CHECK(report.blocks_moved >= 1);
    CHECK(pool.address(movable) != movable_before);
    CHECK(thrust::raw_pointer_cast(values.data()) == before);
    const std::uint64_t sum = thrust::reduce(values.begin(), values.end(), std::uint64_t{0});
    CHECK(sum == count * (count + 1) / 2);
    pool.check_invariants();
  }
  CHECK(pool.statistics().live_allocations == 1);  // the vector freed its block
  CHECK(pool.statistics().pinned_allocations == 0);
  pool.free(movable);
}
