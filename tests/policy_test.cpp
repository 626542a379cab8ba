// DefragPolicy: the threshold (strictly exceeded), min_free_bytes, the interval on a fake clock,
// and bad options.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <vector>

#include <vramkit/host_device.hpp>
#include <vramkit/policy.hpp>
#include <vramkit/units.hpp>

using namespace vramkit;
using namespace std::chrono_literals;

namespace {

// A clock the test moves by hand.
struct FakeClock {
  std::shared_ptr<std::chrono::steady_clock::time_point> time =
      std::make_shared<std::chrono::steady_clock::time_point>();
  PolicyClock function() const {
    return [time = time] { return *time; };
  }
  void advance(std::chrono::steady_clock::duration by) const { *time += by; }
};

PoolStatistics free_space(std::uint64_t free_bytes, std::uint64_t largest_free_block) {
  PoolStatistics statistics;
  statistics.reserved_bytes = 2 * free_bytes;
  statistics.used_bytes = free_bytes;
  statistics.free_bytes = free_bytes;
  statistics.largest_free_block = largest_free_block;
  return statistics;
}

// 16 blocks of 256 KiB fill 4 MiB; the even ones are pinned for life and the odd ones freed, so
// eight holes remain that no compaction can merge: fragmentation stays at 1 - 1/8.
struct PinnedCheckerboard {
  Pool pool{{.capacity_bytes = 4_MiB}, make_host_device()};
  std::vector<Handle> pinned;
  PinnedCheckerboard() {
    std::vector<Handle> movable;
    for (int i = 0; i < 16; ++i) {
      if (i % 2 == 0)
        pinned.push_back(pool.allocate_pinned(256_KiB));
      else
        movable.push_back(pool.allocate(256_KiB));
    }
    for (Handle handle : movable) pool.free(handle);
  }
};

}  // namespace

TEST_CASE("policy compacts only when fragmentation strictly exceeds the threshold", "[policy]") {
  DefragPolicy policy({.fragmentation_threshold = 0.25});
  CHECK(free_space(1024, 768).fragmentation() == 0.25);       // exactly representable
  CHECK_FALSE(policy.should_compact(free_space(1024, 768)));  // at the threshold
  CHECK(policy.should_compact(free_space(1024, 767)));        // just above
  CHECK_FALSE(policy.should_compact(free_space(1024, 769)));  // just below
  CHECK_FALSE(policy.should_compact(free_space(0, 0)));       // nothing free: fragmentation 0
  CHECK_FALSE(policy.should_compact(free_space(1024, 1024)));
}

TEST_CASE("policy with threshold 1 never compacts and with threshold 0 compacts any split free space",
          "[policy]") {
  DefragPolicy never({.fragmentation_threshold = 1.0});
  CHECK_FALSE(never.should_compact(free_space(1024, 1)));
  DefragPolicy eager({.fragmentation_threshold = 0.0});
  CHECK(eager.should_compact(free_space(1024, 1023)));
  CHECK_FALSE(eager.should_compact(free_space(1024, 1024)));
}

TEST_CASE("policy ignores fragmentation while free memory is below min_free_bytes", "[policy]") {
  DefragPolicy policy({.fragmentation_threshold = 0.25, .min_free_bytes = 2048});
  CHECK_FALSE(policy.should_compact(free_space(2047, 1)));
  CHECK(policy.should_compact(free_space(2048, 1)));
}

TEST_CASE("policy compacts at most once per interval, measured on its clock", "[policy]") {
  FakeClock clock;
  PinnedCheckerboard board;
  REQUIRE(board.pool.statistics().fragmentation() == Approx(0.875));
  DefragPolicy policy({.clock = clock.function()});  // 0.30, 5 minutes

  // The first decision is not held back: the policy has not compacted yet.
  auto report = policy.maybe_compact(board.pool);
  REQUIRE(report);
  CHECK(board.pool.statistics().compactions == 1);
  CHECK(board.pool.statistics().fragmentation() == Approx(0.875));  // pins keep the holes

  clock.advance(5min - 1ns);
  CHECK_FALSE(policy.should_compact(board.pool.statistics()));
  CHECK_FALSE(policy.maybe_compact(board.pool));
  CHECK(board.pool.statistics().compactions == 1);

  clock.advance(1ns);  // exactly the interval
  CHECK(policy.maybe_compact(board.pool));
  CHECK(board.pool.statistics().compactions == 2);

  clock.advance(1min);
  CHECK_FALSE(policy.maybe_compact(board.pool));
  clock.advance(4min);
  CHECK(policy.maybe_compact(board.pool));
  CHECK(board.pool.statistics().compactions == 3);
}

TEST_CASE("policy does not compact a healthy pool, however long it waits", "[policy]") {
  FakeClock clock;
  Pool pool({.capacity_bytes = 4_MiB}, make_host_device());
  Handle a = pool.allocate(1_MiB);
  DefragPolicy policy({.clock = clock.function()});
  for (int i = 0; i < 3; ++i) {
    clock.advance(1h);
    CHECK_FALSE(policy.maybe_compact(pool));
  }
  CHECK(pool.statistics().compactions == 0);
  pool.free(a);
}

TEST_CASE("policy's compaction merges movable holes", "[policy]") {
  Pool pool({.capacity_bytes = 4_MiB}, make_host_device());
  std::vector<Handle> handles;
  for (int i = 0; i < 16; ++i) handles.push_back(pool.allocate(256_KiB));
  for (std::size_t i = 1; i < handles.size(); i += 2) pool.free(handles[i]);
  DefragPolicy policy;
  auto report = policy.maybe_compact(pool);
  REQUIRE(report);
  CHECK(report->fragmentation_before == Approx(0.875));
  CHECK(report->fragmentation_after == 0.0);
  CHECK(pool.statistics().free_ranges == 1);
  pool.check_invariants();
}

TEST_CASE("policy rejects a threshold outside [0, 1], NaN and a negative interval, naming the value",
          "[policy][errors]") {
  CHECK_THROWS_AS(DefragPolicy({.fragmentation_threshold = 1.5}), vramkit::invalid_argument);
  CHECK_THROWS_WITH(DefragPolicy({.fragmentation_threshold = -0.25}), Catch::Contains("-0.25"));
  CHECK_THROWS_WITH(DefragPolicy({.fragmentation_threshold = std::nan("")}), Catch::Contains("nan"));
  CHECK_THROWS_WITH(DefragPolicy({.min_interval = -2s}), Catch::Contains("-2"));
  CHECK_NOTHROW(DefragPolicy({.fragmentation_threshold = 0.0, .min_interval = 0s}));
  CHECK_NOTHROW(DefragPolicy({.fragmentation_threshold = 1.0}));
}
