// Host memory running out inside the pool: an allocation whose heap bookkeeping cannot grow, and a
// compaction in parts whose planner or device cannot allocate part way. This file replaces the
// global operator new of the test program with one that can fail on purpose: a countdown on the
// calling thread (off unless a test arms it), so other threads and other tests are untouched.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <new>
#include <vector>

#include <vramkit/host_device.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/units.hpp>

#include "support/patterns.hpp"

namespace {
// Allocations left on this thread before one throws std::bad_alloc; negative: never.
thread_local long long allocations_until_failure = -1;

// Runs `operation` with the k-th host allocation it makes failing (k = 0, 1, ...), until it runs
// without one failing. Calls `check(failed)` after each run, with the countdown off.
template <class Operation, class Check>
int walk_host_allocations(Operation&& operation, Check&& check) {
  int failures = 0;
  for (long long k = 0;; ++k) {
    bool failed = false;
    allocations_until_failure = k;
    try {
      operation();
    } catch (const std::bad_alloc&) {
      failed = true;
    }
    allocations_until_failure = -1;
    check(failed);
    if (!failed) return failures;
    ++failures;
  }
}
}  // namespace

void* operator new(std::size_t bytes) {
  if (allocations_until_failure >= 0 && allocations_until_failure-- == 0) throw std::bad_alloc();
  if (void* memory = std::malloc(bytes != 0 ? bytes : 1)) return memory;
  throw std::bad_alloc();
}
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, std::size_t) noexcept { std::free(memory); }

using namespace vramkit;
using vramkit_test::holds_pattern;
using vramkit_test::write_pattern;

TEST_CASE("an allocation that runs out of host memory leaves no slot behind and can be retried",
          "[pool][host-memory]") {
  Pool pool({.capacity_bytes = 64_MiB, .free_cache_bytes = 0}, make_host_device());
  std::vector<Handle> handles;
  handles.reserve(4000);
  int failures = 0;
  // The table and the heaps grow their storage now and then: walk the failure over every host
  // allocation of each of 3,000 allocations (every other one freed, so the heap splits and merges).
  for (int i = 0; i < 3000; ++i) {
    Handle handle;
    failures += walk_host_allocations([&] { handle = pool.allocate(256 + 256 * (i % 7), i % 5 == 0 ? 4096 : 256); },
                                      [&](bool failed) {
                                        if (!failed) return;
                                        REQUIRE(pool.statistics().live_allocations == handles.size());
                                        pool.check_invariants();
                                      });
    handles.push_back(handle);
    if (i % 2 == 1) {
      pool.free(handles[handles.size() - 2]);
      handles.erase(handles.end() - 2);
    }
  }
  INFO("allocations that ran out of host memory: " << failures);
  CHECK(failures > 3);
  CHECK(pool.statistics().live_allocations == handles.size());
  pool.check_invariants();
}

TEST_CASE("a compaction in parts that runs out of host memory part way loses no byte", "[compaction][host-memory]") {
  // Buffers over two segments with a pinned one late in the first (the planner then lists a gap,
  // which allocates), every third freed, compacted in parts: the first parts run before the rest
  // is planned, so a failure after them must keep their moves.
  const auto build = [] {
    auto pool = std::make_unique<Pool>(
        PoolOptions{.capacity_bytes = 2_MiB, .max_capacity_bytes = 4_MiB, .compaction_parts = CompactionParts::always},
        make_host_device());
    std::vector<std::pair<Handle, std::uint64_t>> live;
    std::vector<Handle> all;
    for (int i = 0; i < 300; ++i) all.push_back(pool->allocate(4_KiB + 1_KiB * (i % 9)));
    for (int i = 0; i < 300; ++i) {
      if (i % 3 == 0) {
        pool->free(all[i]);
      } else {
        write_pattern(*pool, all[i], 100 + i);
        live.emplace_back(all[i], 100 + i);
      }
    }
    pool->pin(live[150].first);
    return std::make_pair(std::move(pool), std::move(live));
  };
  int failures = 0;
  for (long long k = 0;; ++k) {
    INFO("host allocation " << k << " of the compaction fails");
    auto [pool, live] = build();
    bool failed = false;
    allocations_until_failure = k;
    try {
      pool->compact({.release_empty_segments = false});
    } catch (const std::bad_alloc&) {  // the planner's, raised once the moves that ran are applied
      failed = true;
    } catch (const device_error&) {  // a part that could not run: "compaction stopped after ..."
      failed = true;
    }
    allocations_until_failure = -1;
    for (const auto& [handle, key] : live) REQUIRE(holds_pattern(*pool, handle, key));
    if (!failed) break;
    ++failures;
  }
  INFO("compactions that ran out of host memory: " << failures);
  CHECK(failures > 5);
}
