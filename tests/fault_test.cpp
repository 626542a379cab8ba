// Fault injection walks: the host device fails the k-th region request, copy or move, for every k
// that an operation reaches. Afterwards every handle resolves to intact data, the invariants hold,
// the statistics agree with the memory map, and the pool keeps working once the faults stop.
// (The walk over the moves of one full compaction is in pool_compaction_test.cpp.)
#include <catch2/catch.hpp>

#include <functional>
#include <iostream>

#include <vramkit/host_device.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/units.hpp>

#include "support/patterns.hpp"
#include "support/phased_hole_layout.hpp"

using namespace vramkit;
using vramkit_test::holds_pattern;
using vramkit_test::pattern;
using vramkit_test::write_pattern;

namespace {

enum class FaultKind { obtain, copy, move, part };

const char* to_string(FaultKind kind) {
  switch (kind) {
    case FaultKind::obtain:
      return "region request";
    case FaultKind::copy:
      return "copy";
    case FaultKind::move:
      return "move";
    case FaultKind::part:
      return "part of a compaction in parts";
  }
  return "?";
}

std::uint64_t calls_of(const HostCallCounts& counts, FaultKind kind) {
  switch (kind) {
    case FaultKind::obtain:
      return counts.obtains;
    case FaultKind::copy:
      return counts.copies;
    case FaultKind::move:
      return counts.moves;
    case FaultKind::part:
      return counts.parts;
  }
  return 0;
}

HostFaults fault_at(FaultKind kind, std::uint64_t k) {
  switch (kind) {
    case FaultKind::obtain:
      return {.obtain_at = k};
    case FaultKind::copy:
      return {.copy_at = k};
    case FaultKind::move:
      return {.move_at = k};
    case FaultKind::part:
      return {.part_at = k};
  }
  return {};
}

/// A pool with live buffers, each holding the pattern of its key.
struct Scenario {
  std::shared_ptr<HostDevice> device;
  std::unique_ptr<Pool> pool;
  std::vector<std::pair<Handle, std::uint64_t>> live;
};

using Build = std::function<Scenario()>;
/// May throw device_error; keeps `live` exact (a buffer is listed once its pattern is written).
using Operation = std::function<void(Scenario&)>;

// The figure for docs/reliability.md, printed when the program ends.
std::uint64_t fault_points_walked = 0;
struct ReportFaultPoints {
  ~ReportFaultPoints() {
    if (fault_points_walked != 0) std::cout << "fault points walked: " << fault_points_walked << "\n";
  }
} report_fault_points;

// Every byte intact, invariants, statistics against the memory map; then the pool still works.
void check_intact_and_working(Scenario& scenario) {
  Pool& pool = *scenario.pool;
  scenario.device->set_faults({});
  pool.check_invariants();
  for (const auto& [handle, key] : scenario.live) {
    REQUIRE(pool.valid(handle));
    REQUIRE(holds_pattern(pool, handle, key));
  }
  const PoolStatistics statistics = pool.statistics();
  std::uint64_t live_bytes = 0, free_bytes = 0, live_blocks = 0, largest_free = 0;
  for (const BlockInfo& block : pool.block_map()) {
    if (block.state == BlockState::free) {
      free_bytes += block.bytes;
      largest_free = std::max(largest_free, block.bytes);
    } else {
      live_bytes += block.bytes;
      ++live_blocks;
    }
  }
  CHECK(statistics.live_allocations == scenario.live.size());
  CHECK(live_blocks == scenario.live.size());
  CHECK(statistics.used_bytes == live_bytes);
  CHECK(statistics.free_bytes == free_bytes);
  CHECK(statistics.reserved_bytes == live_bytes + free_bytes);
  CHECK(statistics.largest_free_block == largest_free);
  CHECK(statistics.pinned_allocations == 0);
  CHECK(statistics.allocation_failures <= statistics.allocation_requests);
  const std::uint64_t reserved_on_device =
      scenario.device->memory_info().total_bytes - scenario.device->memory_info().free_bytes;
  CHECK(reserved_on_device == statistics.reserved_bytes);  // no region leaked or lost

  // The pool keeps working: a new buffer, a full compaction, everything still intact.
  const Handle extra = pool.allocate(3000);
  write_pattern(pool, extra, 999);
  pool.compact();
  CHECK(holds_pattern(pool, extra, 999));
  pool.free(extra);
  for (const auto& [handle, key] : scenario.live) REQUIRE(holds_pattern(pool, handle, key));
  pool.check_invariants();
}

/// Runs `operation` once without faults to count its calls of `kind`, then once per call with that
/// call failing. Returns the number of fault points walked.
std::uint64_t walk(const Build& build, const Operation& operation, FaultKind kind) {
  std::uint64_t calls = 0;
  {
    Scenario scenario = build();
    scenario.device->set_faults({});
    operation(scenario);
    calls = calls_of(scenario.device->counts(), kind);
    check_intact_and_working(scenario);
  }
  for (std::uint64_t k = 1; k <= calls; ++k) {
    INFO("fault at " << to_string(kind) << " " << k << " of " << calls);
    Scenario scenario = build();
    const std::uint64_t failures_before = scenario.pool->statistics().allocation_failures;
    const std::uint64_t requests_before = scenario.pool->statistics().allocation_requests;
    scenario.device->set_faults(fault_at(kind, k));
    CHECK_THROWS_AS(operation(scenario), device_error);
    const PoolStatistics statistics = scenario.pool->statistics();
    CHECK(statistics.allocation_requests - requests_before >=
          statistics.allocation_failures - failures_before);
    check_intact_and_working(scenario);
  }
  fault_points_walked += calls;
  return calls;
}

std::uint64_t walk_all_kinds(const Build& build, const Operation& operation) {
  std::uint64_t total = 0;
  for (FaultKind kind : {FaultKind::obtain, FaultKind::copy, FaultKind::move})
    total += walk(build, operation, kind);
  return total;
}

// Allocates and writes a buffer; a failed write frees it again so `live` stays exact.
void allocate_and_write(Scenario& scenario, std::uint64_t bytes, std::uint64_t key) {
  const Handle handle = scenario.pool->allocate(bytes);
  try {
    write_pattern(*scenario.pool, handle, key);
  } catch (...) {
    scenario.pool->free(handle);
    throw;
  }
  scenario.live.emplace_back(handle, key);
}

// Buffers of mixed sizes in `segments` segments of 1 MiB, every third freed: fragmented.
Build fragmented(std::uint64_t guard_bytes, int buffers, std::uint64_t max_capacity = 4_MiB,
                 CompactionParts parts = CompactionParts::automatic) {
  return [=] {
    Scenario scenario;
    scenario.device = make_host_device();
    scenario.pool = std::make_unique<Pool>(PoolOptions{.capacity_bytes = 1_MiB,
                                                       .max_capacity_bytes = max_capacity,
                                                       .compaction_parts = parts,
                                                       .guard_bytes = guard_bytes},
                                           scenario.device);
    std::vector<Handle> handles;
    for (int i = 0; i < buffers; ++i)
      handles.push_back(scenario.pool->allocate(9_KiB + 5_KiB * (i % 5) + 17 * i));
    for (int i = 0; i < buffers; ++i) {
      if (i % 3 == 0) {
        scenario.pool->free(handles[i]);
      } else {
        write_pattern(*scenario.pool, handles[i], 1000 + i);
        scenario.live.emplace_back(handles[i], 1000 + i);
      }
    }
    return scenario;
  };
}

}  // namespace

TEST_CASE("faults during a growth (region request, guard fill, copy) lose nothing", "[faults]") {
  const std::uint64_t guard = GENERATE(0u, 64u);
  INFO("guard bytes " << guard);
  // 40 buffers of ~19 KiB, a third freed: about 500 KiB free in one segment; 900 KiB needs a new one.
  const Build build = fragmented(guard, 40);
  const Operation grow = [](Scenario& scenario) {
    const auto segments = scenario.pool->statistics().segments;
    allocate_and_write(scenario, 900_KiB, 7);
    CHECK(scenario.pool->statistics().segments == segments + 1);
  };
  CHECK(walk(build, grow, FaultKind::obtain) == 1);
  CHECK(walk(build, grow, FaultKind::copy) == (guard != 0 ? 2 : 1));
  CHECK(walk(build, grow, FaultKind::move) == 0);
}

TEST_CASE("faults during an allocation that compacts a hole first lose nothing", "[faults][compaction]") {
  const std::uint64_t guard = GENERATE(0u, 64u);
  INFO("guard bytes " << guard);
  const Build build = fragmented(guard, 50, 0);  // no growth: the hole is the only way
  const Operation allocate_in_hole = [](Scenario& scenario) {
    allocate_and_write(scenario, 200_KiB, 8);
    CHECK(scenario.pool->statistics().compactions == 1);
  };
  CHECK(walk(build, allocate_in_hole, FaultKind::move) > 3);
  walk(build, allocate_in_hole, FaultKind::copy);
}

TEST_CASE("faults during full, hole, budgeted and segment-releasing compactions lose nothing",
          "[faults][compaction]") {
  const std::uint64_t guard = GENERATE(0u, 32u);
  INFO("guard bytes " << guard);
  SECTION("full compaction that releases emptied segments") {
    // 150 buffers over 3 segments, two thirds freed: everything fits in the first again.
    const Build build = [guard] {
      Scenario scenario = fragmented(guard, 150)();
      std::erase_if(scenario.live, [&](const auto& entry) {
        if (entry.second % 3 == 0) return false;
        scenario.pool->free(entry.first);
        return true;
      });
      return scenario;
    };
    REQUIRE(build().pool->statistics().segments >= 3);
    const Operation compact = [](Scenario& scenario) {
      const CompactionReport report = scenario.pool->compact();
      CHECK(report.segments_released > 0);
    };
    CHECK(walk_all_kinds(build, compact) > 10);
  }
  SECTION("full compaction keeping the segments") {
    const Operation compact = [](Scenario& scenario) {
      scenario.pool->compact({.release_empty_segments = false});
    };
    CHECK(walk_all_kinds(fragmented(guard, 120), compact) > 10);
  }
  SECTION("hole compaction") {
    const Operation compact = [](Scenario& scenario) {
      const bool goal_met =
          scenario.pool->compact({.goal = CompactGoal::hole, .hole_bytes = 192_KiB}).goal_met;
      CHECK(goal_met);
    };
    CHECK(walk_all_kinds(fragmented(guard, 50, 0), compact) >= 3);
  }
  SECTION("full compaction in parts, a later part failing after earlier ones ran") {
    // Every third block freed over several segments; the parts (32 blocks, then each twice all before)
    // each run before the next is planned. A part that cannot run must leave the earlier parts'
    // moves applied (their sources are overwritten by then), not undone.
    const Operation compact = [](Scenario& scenario) {
      scenario.pool->compact({.release_empty_segments = false});
    };
    CHECK(walk(fragmented(guard, 400, 16_MiB, CompactionParts::always), compact, FaultKind::part) >= 3);
    CHECK(walk(fragmented(guard, 150, 4_MiB, CompactionParts::always), compact, FaultKind::move) > 10);
  }
  SECTION("hole compaction whose plan takes several phases") {
    // Without whole-move phases a fault between the phases left a block half here, half there
    // (heap rebuild failed; a buffer lost).
    const Build build = [guard] {
      Scenario scenario;
      scenario.device = make_host_device();
      scenario.pool = std::make_unique<Pool>(
          PoolOptions{.capacity_bytes = vramkit_test::PhasedHoleLayout::capacity_bytes, .compact_on_failure = false,
                      .guard_bytes = guard, .free_cache_bytes = 0},
          scenario.device);
      scenario.live = vramkit_test::build_phased_hole_layout(*scenario.pool);
      return scenario;
    };
    const Operation compact = [](Scenario& scenario) {
      scenario.pool->compact(vramkit_test::PhasedHoleLayout::compaction());
    };
    CHECK(walk(build, compact, FaultKind::move) >= 4);
  }
  SECTION("budgeted compaction") {
    const Operation compact = [](Scenario& scenario) {
      scenario.pool->compact({.max_bytes_moved = 200_KiB});
    };
    CHECK(walk_all_kinds(fragmented(guard, 50, 0), compact) > 3);
  }
}

TEST_CASE("faults during writes, reads and fills change nothing and are reported", "[faults]") {
  const Build build = fragmented(64, 24, 0);
  SECTION("a failed write leaves the old bytes") {
    const Operation rewrite = [](Scenario& scenario) {
      for (auto& [handle, key] : scenario.live) {
        write_pattern(*scenario.pool, handle, key + 1);
        ++key;
      }
    };
    CHECK(walk(build, rewrite, FaultKind::copy) == 16);
  }
  SECTION("a failed read reports, then reads work") {
    const Operation read_all = [](Scenario& scenario) {
      for (const auto& [handle, key] : scenario.live) {
        const bool intact = holds_pattern(*scenario.pool, handle, key);  // throws on the injected fault
        CHECK(intact);
      }
    };
    CHECK(walk(build, read_all, FaultKind::copy) == 16);
  }
  SECTION("a failed fill leaves the old bytes") {
    const Operation fill_and_free = [](Scenario& scenario) {
      for (int i = 0; i < 4; ++i) {
        const Handle handle = scenario.live.back().first;
        scenario.pool->fill(handle, std::byte{0});
        scenario.pool->free(handle);
        scenario.live.pop_back();
      }
    };
    CHECK(walk(build, fill_and_free, FaultKind::copy) == 4);
  }
}
