// Metrics: every statistic recomputed from the block map after seeded random operations; alerts
// once per crossing; statistics scopes; the device monitor; bad options.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <random>
#include <vector>

#include <vramkit/alerts.hpp>
#include <vramkit/device_monitor.hpp>
#include <vramkit/host_device.hpp>
#include <vramkit/statistics_scope.hpp>
#include <vramkit/units.hpp>

using namespace vramkit;

namespace {

// What PoolStatistics should say, walking every block (the pool reads counters instead).
struct Recomputed {
  std::uint64_t reserved = 0, used = 0, free = 0, largest_free = 0, free_ranges = 0, live = 0, pinned = 0;
  double sum_of_squared_free = 0;
};

Recomputed recompute(const std::vector<BlockInfo>& map) {
  Recomputed r;
  for (const BlockInfo& block : map) {
    r.reserved += block.bytes;
    if (block.state == BlockState::free) {
      r.free += block.bytes;
      r.largest_free = std::max(r.largest_free, block.bytes);
      ++r.free_ranges;
      r.sum_of_squared_free += static_cast<double>(block.bytes) * static_cast<double>(block.bytes);
    } else {
      r.used += block.bytes;
      ++r.live;
      if (block.state != BlockState::live) ++r.pinned;
    }
  }
  return r;
}

void check_against_block_map(const Pool& pool) {
  const PoolStatistics s = pool.statistics();
  const std::vector<BlockInfo> map = pool.block_map();
  const Recomputed r = recompute(map);
  CHECK(s.reserved_bytes == r.reserved);
  CHECK(s.used_bytes == r.used);
  CHECK(s.free_bytes == r.free);
  CHECK(s.largest_free_block == r.largest_free);
  CHECK(s.free_ranges == r.free_ranges);
  CHECK(s.live_allocations == r.live);
  CHECK(s.pinned_allocations == r.pinned);
  CHECK(s.segments == pool.segments().size());
  CHECK(s.sum_of_squared_free == Approx(r.sum_of_squared_free));
  const double fragmentation = r.free == 0 ? 0.0 : 1.0 - double(r.largest_free) / double(r.free);
  const double quadratic = r.free == 0 ? 0.0 : 1.0 - std::sqrt(r.sum_of_squared_free) / double(r.free);
  const double utilization = r.reserved == 0 ? 0.0 : double(r.used) / double(r.reserved);
  CHECK(s.fragmentation() == Approx(fragmentation).margin(1e-12));
  CHECK(s.fragmentation_quadratic() == Approx(quadratic).margin(1e-9));
  CHECK(s.utilization() == Approx(utilization).margin(1e-12));
  CHECK(s.fragmentation() >= 0.0);
  CHECK(s.fragmentation() <= 1.0);
  CHECK(s.fragmentation_quadratic() >= -1e-12);
  CHECK(s.fragmentation_quadratic() <= s.fragmentation() + 1e-12);  // sqrt(sum x^2) >= max x
  CHECK(s.peak_used_bytes >= s.used_bytes);
  CHECK(s.peak_reserved_bytes >= s.reserved_bytes);
  CHECK(s.allocation_failures <= s.allocation_requests);
}

struct Live {
  Handle handle;
  int pins = 0;
};

}  // namespace

TEST_CASE(
    "every statistic matches the block map after seeded random allocations, frees, pins and compactions",
    "[metrics]") {
  const std::uint64_t seed = GENERATE(1u, 2u, 3u, 20240601u, static_cast<std::uint64_t>(Catch::rngSeed()));
  INFO("seed " << seed);
  std::mt19937_64 random(seed);
  Pool pool({.capacity_bytes = 4_MiB, .max_capacity_bytes = 8_MiB, .segment_bytes = 1_MiB},
            make_host_device());
  std::vector<Live> live;
  std::uint64_t requests = 0, failures = 0;
  for (int step = 0; step < 600; ++step) {
    const auto action = random() % 100;
    if (action < 45 || live.empty()) {
      const std::uint64_t bytes = 1 + random() % (random() % 4 == 0 ? 1536_KiB : 32_KiB);
      const std::uint64_t alignment = std::uint64_t{256} << (random() % 4);
      ++requests;
      try {
        const bool pinned = random() % 10 == 0;
        live.push_back({pinned ? pool.allocate_pinned(bytes, alignment) : pool.allocate(bytes, alignment)});
      } catch (const out_of_memory&) {
        ++failures;
      }
    } else if (action < 80) {
      const std::size_t index = random() % live.size();
      while (live[index].pins > 0) {
        pool.unpin(live[index].handle);
        --live[index].pins;
      }
      pool.free(live[index].handle);
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(index));
    } else if (action < 92) {
      Live& entry = live[random() % live.size()];
      if (entry.pins > 0 && random() % 2 == 0) {
        pool.unpin(entry.handle);
        --entry.pins;
      } else {
        pool.pin(entry.handle);
        ++entry.pins;
      }
    } else {
      pool.compact(random() % 2 == 0 ? CompactOptions{}
                                     : CompactOptions{.goal = CompactGoal::hole, .hole_bytes = 256_KiB});
    }
    if (step % 25 == 0) check_against_block_map(pool);
  }
  check_against_block_map(pool);
  const PoolStatistics s = pool.statistics();
  CHECK(s.allocation_requests == requests);
  CHECK(s.allocation_failures == failures);
  CHECK(s.success_rate() == Approx(requests == 0 ? 1.0 : double(requests - failures) / double(requests)));
  CHECK(s.peak_utilization() == Approx(double(s.peak_used_bytes) / double(s.peak_reserved_bytes)));
  pool.check_invariants();
}

TEST_CASE("derived metrics of an empty pool and of no statistics at all", "[metrics]") {
  PoolStatistics none;
  CHECK(none.fragmentation() == 0.0);
  CHECK(none.fragmentation_quadratic() == 0.0);
  CHECK(none.utilization() == 0.0);
  CHECK(none.success_rate() == 1.0);
  CHECK(none.peak_utilization() == 0.0);
  Pool pool({.capacity_bytes = 4_MiB}, make_host_device());
  const PoolStatistics s = pool.statistics();
  CHECK(s.free_bytes == 4_MiB);
  CHECK(s.largest_free_block == 4_MiB);
  CHECK(s.free_ranges == 1);
  CHECK(s.fragmentation() == 0.0);
  CHECK(s.fragmentation_quadratic() == Approx(0.0).margin(1e-12));
  check_against_block_map(pool);
}

// ---- Alerts ----------------------------------------------------------------------------------

namespace {

PoolStatistics with_utilization(double utilization) {
  PoolStatistics s;
  s.reserved_bytes = 1000;
  s.used_bytes = static_cast<std::uint64_t>(utilization * 1000);
  s.free_bytes = s.reserved_bytes - s.used_bytes;
  s.largest_free_block = s.free_bytes;
  s.free_ranges = s.free_bytes == 0 ? 0 : 1;
  return s;
}

}  // namespace

TEST_CASE("an alert fires once per crossing and re-arms on the healthy side", "[metrics][alerts]") {
  std::vector<Alert> alerts;
  AlertMonitor monitor({.callback = [&](const Alert& alert) { alerts.push_back(alert); }});

  CHECK(monitor.check(with_utilization(0.5)) == 0);
  CHECK(monitor.check(with_utilization(0.8)) == 0);  // at the threshold: not over
  CHECK(monitor.check(with_utilization(0.85)) == 1);
  REQUIRE(alerts.size() == 1);
  CHECK(alerts[0].kind == AlertKind::utilization);
  CHECK(alerts[0].value == Approx(0.85));
  CHECK(alerts[0].threshold == 0.8);
  CHECK_THAT(alerts[0].message, Catch::Contains("utilization") && Catch::Contains("0.8"));
  CHECK(monitor.active(AlertKind::utilization));

  for (double u : {0.9, 0.95, 0.81}) CHECK(monitor.check(with_utilization(u)) == 0);  // still over
  CHECK(alerts.size() == 1);

  CHECK(monitor.check(with_utilization(0.7)) == 0);  // back: re-arms
  CHECK_FALSE(monitor.active(AlertKind::utilization));
  CHECK(monitor.check(with_utilization(0.9)) == 1);  // second crossing
  CHECK(alerts.size() == 2);
}

TEST_CASE("success rate and fragmentation alerts each fire once per crossing", "[metrics][alerts]") {
  std::vector<AlertKind> kinds;
  AlertMonitor monitor({.callback = [&](const Alert& alert) { kinds.push_back(alert.kind); }});
  PoolStatistics s = with_utilization(0.5);
  s.allocation_requests = 100;
  s.allocation_failures = 10;  // 0.9: at the threshold, not under
  CHECK(monitor.check(s) == 0);
  s.allocation_requests = 101;
  s.allocation_failures = 11;
  CHECK(monitor.check(s) == 1);
  CHECK(monitor.check(s) == 0);
  s.free_bytes = 500;
  s.largest_free_block = 250;  // fragmentation 0.5
  s.free_ranges = 2;
  CHECK(monitor.check(s) == 1);
  CHECK(monitor.check(s) == 0);
  REQUIRE(kinds == std::vector<AlertKind>{AlertKind::success_rate, AlertKind::fragmentation});
  s.allocation_requests = 1000;  // success rate recovers
  CHECK(monitor.check(s) == 0);
  CHECK_FALSE(monitor.active(AlertKind::success_rate));
  CHECK(monitor.active(AlertKind::fragmentation));
}

TEST_CASE("alerts follow a real pool filling up and draining", "[metrics][alerts]") {
  int fired = 0;
  AlertMonitor monitor({.fragmentation_warn = 1.0, .callback = [&](const Alert&) { ++fired; }});
  Pool pool({.capacity_bytes = 4_MiB}, make_host_device());
  std::vector<Handle> handles;
  for (int i = 0; i < 16; ++i) {
    handles.push_back(pool.allocate(256_KiB));
    monitor.check(pool.statistics());
  }
  CHECK(fired == 1);  // crossed 0.8 once, at 13 of 16 blocks
  while (!handles.empty()) {
    pool.free(handles.back());
    handles.pop_back();
    monitor.check(pool.statistics());
  }
  CHECK(fired == 1);
  CHECK_FALSE(monitor.active(AlertKind::utilization));
}

TEST_CASE("alert monitor rejects thresholds outside [0, 1] and NaN, naming them",
          "[metrics][alerts][errors]") {
  CHECK_THROWS_WITH(AlertMonitor({.utilization_warn = 1.5}),
                    Catch::Contains("utilization_warn") && Catch::Contains("1.5"));
  CHECK_THROWS_AS(AlertMonitor({.success_rate_warn = -0.1}), vramkit::invalid_argument);
  CHECK_THROWS_WITH(AlertMonitor({.fragmentation_warn = std::nan("")}),
                    Catch::Contains("fragmentation_warn"));
  CHECK_NOTHROW(AlertMonitor({.utilization_warn = 0, .success_rate_warn = 1, .fragmentation_warn = 0}));
}

// ---- Statistics scopes -----------------------------------------------------------------------

TEST_CASE("a statistics scope reports the counters of its stage only", "[metrics][scope]") {
  Pool pool({.capacity_bytes = 4_MiB}, make_host_device());
  Handle before = pool.allocate(1_MiB);
  pool.compact();
  StatisticsScope scope(pool, "blur");
  CHECK(scope.name() == "blur");
  std::vector<Handle> handles;
  for (int i = 0; i < 8; ++i) handles.push_back(pool.allocate(256_KiB));
  CHECK_THROWS_AS(pool.allocate(3_MiB), out_of_memory);
  for (std::size_t i = 0; i < handles.size(); i += 2) pool.free(handles[i]);
  pool.free(before);
  const CompactionReport report = pool.compact();

  const StatisticsDelta delta = scope.delta();
  CHECK(delta.allocation_requests == 9);
  CHECK(delta.allocation_failures == 1);
  CHECK(delta.success_rate() == Approx(8.0 / 9.0));
  CHECK(delta.compactions >= 1);  // the failed request may have tried one too
  CHECK(delta.bytes_moved >= report.bytes_moved);
  CHECK(delta.bytes_moved == pool.statistics().bytes_moved - scope.start().bytes_moved);
  // (c1 + c2) - c1 may round one ulp below c2: compare with a margin far below any real duration.
  CHECK(delta.compaction_time.count() >= report.seconds.count() - 1e-12);
  CHECK(delta.used_bytes_change == static_cast<std::int64_t>(4 * 256_KiB) - static_cast<std::int64_t>(1_MiB));
  CHECK(delta.live_allocations_change == 3);
  CHECK(delta.reserved_bytes_change == 0);
  CHECK(delta.raised_peak_used_bytes == 3_MiB);
  CHECK(delta.start.used_bytes == 1_MiB);
  CHECK(delta.end.used_bytes == 1_MiB);
}

TEST_CASE("a scope that did not raise the lifetime peak says 0", "[metrics][scope]") {
  Pool pool({.capacity_bytes = 4_MiB}, make_host_device());
  pool.free(pool.allocate(2_MiB));
  StatisticsScope scope(pool, "small");
  pool.free(pool.allocate(1_MiB));
  CHECK(scope.delta().raised_peak_used_bytes == 0);
  CHECK(scope.delta().allocation_requests == 1);
}

TEST_CASE("a statistics stack nests stages and names them by path", "[metrics][scope]") {
  Pool pool({.capacity_bytes = 4_MiB}, make_host_device());
  StatisticsStack stack(pool);
  CHECK_THROWS_AS(stack.pop(), state_error);
  stack.push("frame");
  Handle a = pool.allocate(1_MiB);
  stack.push("blur");
  Handle b = pool.allocate(1_MiB);
  pool.free(b);
  CHECK(stack.depth() == 2);
  const StageRecord inner = stack.pop();
  CHECK(inner.path == "frame/blur");
  CHECK(inner.depth == 1);
  CHECK(inner.delta.allocation_requests == 1);
  const StageRecord outer = stack.pop();
  CHECK(inner.path == "frame/blur");  // a copy: the second pop leaves it whole
  CHECK(outer.path == "frame");
  CHECK(outer.depth == 0);
  CHECK(outer.delta.allocation_requests == 2);
  CHECK(outer.delta.used_bytes_change == static_cast<std::int64_t>(1_MiB));
  REQUIRE(stack.records().size() == 2);
  CHECK(stack.records()[0].path == "frame/blur");
  CHECK(stack.depth() == 0);
  pool.free(a);
}

// ---- Device monitor --------------------------------------------------------------------------

TEST_CASE("device monitor reports memory held outside the pool and keeps the last samples",
          "[metrics][device]") {
  auto device = make_host_device({.capacity_bytes = 64_MiB});
  Pool pool({.capacity_bytes = 4_MiB, .max_capacity_bytes = 8_MiB, .segment_bytes = 1_MiB}, device);
  auto time = std::chrono::steady_clock::time_point{};
  DeviceMonitor monitor(pool, {.history = 3, .clock = [&] { return time; }});

  DeviceSample first = monitor.sample();
  CHECK(first.device_total_bytes == 64_MiB);
  CHECK(first.device_free_bytes == 60_MiB);
  CHECK(first.pool_reserved_bytes == 4_MiB);
  CHECK(first.outside_pool_bytes == 0);

  Pool other({.capacity_bytes = 2_MiB}, device);  // someone else's memory on the same device
  Handle h = pool.allocate(3_MiB);
  Handle g = pool.allocate(2_MiB);  // grows the pool by a segment
  time += std::chrono::seconds(1);
  DeviceSample second = monitor.sample();
  CHECK(second.outside_pool_bytes == 2_MiB);
  CHECK(second.pool_reserved_bytes > 4_MiB);
  CHECK(second.pool_used_bytes == 5_MiB);
  CHECK(second.device_free_bytes == 64_MiB - 2_MiB - second.pool_reserved_bytes);

  for (int i = 0; i < 3; ++i) {
    time += std::chrono::seconds(1);
    monitor.sample();
  }
  REQUIRE(monitor.samples().size() == 3);
  CHECK(monitor.samples().front().time == std::chrono::steady_clock::time_point{} + std::chrono::seconds(2));
  CHECK(monitor.samples().back().time == std::chrono::steady_clock::time_point{} + std::chrono::seconds(4));
  pool.free(h);
  pool.free(g);
}

TEST_CASE("device monitor rejects a history of 0", "[metrics][device][errors]") {
  Pool pool({.capacity_bytes = 1_MiB}, make_host_device());
  CHECK_THROWS_AS(DeviceMonitor(pool, {.history = 0}), vramkit::invalid_argument);
}
