// The update a compaction makes while the device moves the bytes (Device::execute_moves's
// `meanwhile`): if the device then fails, every buffer stays where it was and the pool's slots and
// heaps are put back. (A device that completes only some moves is walked in fault_test.cpp.)
#include <catch2/catch.hpp>

#include <vramkit/errors.hpp>
#include <vramkit/host_device.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/units.hpp>

#include "support/forwarding_device.hpp"
#include "support/patterns.hpp"

using namespace vramkit;
using vramkit_test::holds_pattern;
using vramkit_test::write_pattern;

namespace {

// A host device whose execute_moves, while `fail` is set, runs `meanwhile` as an asynchronous
// device would and then reports an error without having moved anything (as when a CUDA kernel
// cannot start after the pool has updated ahead).
class FailsAfterUpdate final : public vramkit_test::ForwardingDevice {
 public:
  bool fail = false;
  int updates_ahead = 0;

  std::string name() const override { return "fails after the update ahead"; }
  ExecutionResult execute_moves(gsl::span<const compactor::Move> moves, gsl::span<const std::uint64_t> segment_bases,
                                compactor::ChunkPlan& scratch, const std::function<void()>& meanwhile,
                                const HostThreads* threads) override {
    if (!fail) return host_->execute_moves(moves, segment_bases, scratch, meanwhile, threads);
    ++updates_ahead;
    meanwhile();
    throw device_error("injected: the moves could not run after the pool's update ahead");
  }
};

}  // namespace

TEST_CASE("a device that fails after the update ahead leaves every buffer and the bookkeeping as they were",
          "[compaction]") {
  auto device = std::make_shared<FailsAfterUpdate>();
  Pool pool({.capacity_bytes = 4_MiB}, device);
  // Buffers of 256 B..40 KiB with a freed one before each: a full compaction moves all of them.
  std::vector<Handle> live, gaps;
  for (std::uint64_t key = 0; key < 64; ++key) {
    gaps.push_back(pool.allocate(256 * (1 + key % 7)));
    live.push_back(pool.allocate(256 * (1 + (key * 37) % 160)));
    write_pattern(pool, live.back(), key);
  }
  // One pinned buffer in the middle: the plan packs around it (moves on both sides of it).
  const Handle pinned = live[30];
  pool.pin(pinned);
  for (Handle gap : gaps) pool.free(gap);
  std::vector<std::uint64_t> addresses;
  for (Handle handle : live) addresses.push_back(pool.address(handle));
  const PoolStatistics before = pool.statistics();

  device->fail = true;
  CHECK_THROWS_AS(pool.compact(), device_error);
  CHECK(device->updates_ahead == 1);
  pool.check_invariants();
  const PoolStatistics after = pool.statistics();
  CHECK(after.free_bytes == before.free_bytes);
  CHECK(after.largest_free_block == before.largest_free_block);
  CHECK(after.fragmentation() == before.fragmentation());
  for (std::size_t i = 0; i < live.size(); ++i) {
    INFO("buffer " << i);
    CHECK(pool.address(live[i]) == addresses[i]);
    CHECK(holds_pattern(pool, live[i], i));
  }

  // The same compaction then succeeds, and every buffer holds its bytes in its new place.
  device->fail = false;
  pool.unpin(pinned);
  const CompactionReport report = pool.compact();
  CHECK(report.blocks_moved == live.size());
  CHECK(pool.statistics().fragmentation() == 0);
  pool.check_invariants();
  for (std::size_t i = 0; i < live.size(); ++i) {
    INFO("buffer " << i);
    CHECK(holds_pattern(pool, live[i], i));
  }
}
