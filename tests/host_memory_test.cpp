// Host memory running out inside the pool: an allocation whose heap bookkeeping cannot grow, and a
// compaction in parts whose planner or device cannot allocate part way. This file replaces the
// global operator new of the test program with one that can fail on purpose: a countdown on the
// calling thread (off unless a test arms it), so other threads and other tests are untouched.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <new>
#include <vector>

#include <vramkit/heap.hpp>
#include <vramkit/host_device.hpp>
#include <vramkit/planned_batch.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/scoped_arena.hpp>
#include <vramkit/units.hpp>

#include "support/patterns.hpp"
#include "support/pool_fixtures.hpp"

namespace {
// Allocations left on this thread before one throws std::bad_alloc; negative: never.
thread_local long long allocations_until_failure = -1;
// Once one has failed, every later allocation on this thread fails too (host memory that has run
// out stays out), until the countdown is turned off.
thread_local bool failures_persist = false;
// Bytes of host memory that operator new handed out on this thread.
thread_local std::size_t bytes_allocated = 0;

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

// Runs `operation` with every host allocation on this thread from the k-th on failing (host memory
// that has run out stays out). Returns whether it threw (bad_alloc, or an error raised because of
// one); the countdown is off again when this returns, whatever happened.
template <class Operation>
bool run_out_of_memory_from(long long k, Operation&& operation) {
  struct Disarm {
    ~Disarm() {
      failures_persist = false;
      allocations_until_failure = -1;
    }
  } disarm;
  allocations_until_failure = k;
  failures_persist = true;
  try {
    operation();
  } catch (const std::exception&) {
    return true;
  }
  return false;
}
}  // namespace

// clang's static ThreadSanitizer runtime defines these operators itself (a duplicate definition
// at link time): there the walks run without failures and check only that nothing breaks.
#if defined(__clang__) && defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define VRAMKIT_TEST_KEEP_OPERATOR_NEW 1
#endif
#endif
#ifndef VRAMKIT_TEST_KEEP_OPERATOR_NEW
constexpr bool can_fail_host_allocations = true;
void* operator new(std::size_t bytes) {
  if (allocations_until_failure >= 0 && allocations_until_failure-- == 0) {
    if (failures_persist) allocations_until_failure = 0;
    throw std::bad_alloc();
  }
  if (void* memory = std::malloc(bytes != 0 ? bytes : 1)) {
    bytes_allocated += bytes;
    return memory;
  }
  throw std::bad_alloc();
}
// Every other unaligned form, so that each allocation and its release use the same heap (a
// sanitizer's own nothrow or array new freed by this delete is an alloc-dealloc mismatch).
void* operator new[](std::size_t bytes) { return ::operator new(bytes); }
void* operator new(std::size_t bytes, const std::nothrow_t&) noexcept {
  try {
    return ::operator new(bytes);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t bytes, const std::nothrow_t&) noexcept {
  return ::operator new(bytes, std::nothrow);
}
void operator delete(void* memory) noexcept { std::free(memory); }
void operator delete[](void* memory) noexcept { std::free(memory); }
void operator delete(void* memory, std::size_t) noexcept { std::free(memory); }
void operator delete[](void* memory, std::size_t) noexcept { std::free(memory); }
void operator delete(void* memory, const std::nothrow_t&) noexcept { std::free(memory); }
void operator delete[](void* memory, const std::nothrow_t&) noexcept { std::free(memory); }
#else
constexpr bool can_fail_host_allocations = false;
#endif

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
  if (can_fail_host_allocations) CHECK(failures > 3);
  CHECK(pool.statistics().live_allocations == handles.size());
  pool.check_invariants();
}

TEST_CASE("a compaction in parts that runs out of host memory part way loses no byte", "[compaction][host-memory]") {
  // Buffers over two segments with a pinned one amid the first (the planner then lists a gap,
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
    pool->pin(live[60].first);  // in the middle of the first segment, inside the second part
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
    // The heaps still list every live block: the planner finished its walk before the update.
    pool->check_invariants();
    if (!failed) break;
    ++failures;
  }
  INFO("compactions that ran out of host memory: " << failures);
  if (can_fail_host_allocations) CHECK(failures > 5);
}


TEST_CASE("a pool prepared for compaction takes its first compaction's host buffers ahead",
          "[compaction][host-memory]") {
  // Pool::prepare_compaction takes what a pool's first full compaction would: the first
  // compaction of a prepared pool then takes about the host memory on the calling thread that the
  // next one does (the small buffers of every call: the device's report, its callbacks, a few more
  // with each part the device is given), where an unprepared pool's first takes megabytes more.
  // 20,000 kept blocks, walked by a team of 4 (the slide written while the device moves it), by
  // one thread alone (planned first), and with a block pinned (planned in parts).
  struct Case {
    unsigned threads;
    bool pin;
  };
  for (const Case way : {Case{4, false}, Case{1, false}, Case{4, true}}) {
    for (const bool prepared : {false, true}) {
      INFO(way.threads << " threads, " << (way.pin ? "one block pinned, " : "")
                       << (prepared ? "prepared" : "not prepared"));
      Pool pool({.capacity_bytes = 32_MiB, .free_cache_bytes = 0, .compaction_threads = way.threads},
                make_host_device());
      std::size_t prepare_bytes = 0, compaction_bytes[2] = {0, 0};
      for (int round = 0; round < 2; ++round) {
        const std::vector<Handle> kept = vramkit_test::keep_every_other(pool, 40000, way.threads + round);
        if (way.pin) pool.pin(kept[kept.size() / 2]);
        if (prepared && round == 0) {
          const std::size_t before = bytes_allocated;
          pool.prepare_compaction();
          prepare_bytes = bytes_allocated - before;
        }
        const std::size_t before = bytes_allocated;
        const CompactionReport report = pool.compact();
        compaction_bytes[round] = bytes_allocated - before;
        CHECK(report.blocks_moved + 1 >= kept.size());
        pool.check_invariants();
        for (std::size_t i = 0; i < kept.size(); ++i) REQUIRE(holds_pattern(pool, kept[i], 2 * i + 1));
        if (way.pin) pool.unpin(kept[kept.size() / 2]);
        for (Handle handle : kept) pool.free(handle);
      }
      INFO("prepare_compaction took " << prepare_bytes << " bytes, the first compaction " << compaction_bytes[0]
                                      << ", the next " << compaction_bytes[1]);
      if (can_fail_host_allocations) {
        if (prepared) CHECK(compaction_bytes[0] <= compaction_bytes[1] + 64_KiB);
        else CHECK(compaction_bytes[0] > compaction_bytes[1] + 1_MiB);
        if (prepared) CHECK(prepare_bytes > 100 * 20000);
      }
    }
  }
}

TEST_CASE("preparing for compaction without host memory fails with nothing changed and the pool still compacts",
          "[compaction][host-memory]") {
  // Each host allocation of prepare_compaction fails in turn: std::bad_alloc, every buffer intact,
  // and the pool compacts after it (with what was taken kept, or taking the rest itself).
  int failures = 0;
  for (long long k = 0;; ++k) {
    INFO("host allocation " << k << " of prepare_compaction fails");
    Pool pool({.capacity_bytes = 32_MiB, .free_cache_bytes = 0, .compaction_threads = 4}, make_host_device());
    const std::vector<Handle> kept = vramkit_test::keep_every_other(pool, 20000, 5);
    const PoolStatistics before = pool.statistics();
    bool failed = false;
    allocations_until_failure = k;
    try {
      pool.prepare_compaction();
    } catch (const std::bad_alloc&) {
      failed = true;
    }
    allocations_until_failure = -1;
    CHECK(pool.statistics().used_bytes == before.used_bytes);
    CHECK(pool.statistics().compactions == 0);
    pool.check_invariants();
    for (std::size_t i = 0; i < kept.size(); ++i) REQUIRE(holds_pattern(pool, kept[i], 2 * i + 1));
    const CompactionReport report = pool.compact();
    CHECK(report.blocks_moved == kept.size());
    for (std::size_t i = 0; i < kept.size(); ++i) REQUIRE(holds_pattern(pool, kept[i], 2 * i + 1));
    if (!failed) break;
    ++failures;
  }
  INFO("preparations that ran out of host memory: " << failures);
  if (can_fail_host_allocations) CHECK(failures >= 8);
}

TEST_CASE("compactions that run out of host memory for good part way lose no byte and keep heaps and slots agreeing",
          "[compaction][host-memory]") {
  // Host memory that runs out stays out: every allocation from the k-th on fails, the error report
  // and the update after the moves included. Each kind of compaction is walked over every k. The
  // update's memory is taken before anything moves, and a device reports a failed part without
  // allocating; without that, the pool lost buffers here (it undid moves whose sources were
  // overwritten) or left heaps that disagree with their slots.
  struct Kind {
    const char* name;
    CompactionParts parts;
    CompactOptions options;
    bool pin;
  };
  const Kind kinds[] = {
      {"full, in parts, a block pinned", CompactionParts::always, {.release_empty_segments = false}, true},
      {"full, planned first", CompactionParts::never, {.release_empty_segments = false}, false},
      {"full, releasing emptied segments", CompactionParts::automatic, {}, false},
      {"hole", CompactionParts::automatic, {.goal = CompactGoal::hole, .hole_bytes = 96_KiB}, true},
  };
  for (const Kind& kind : kinds) {
    INFO("compaction: " << kind.name);
    const auto build = [&] {
      auto pool = std::make_unique<Pool>(
          PoolOptions{.capacity_bytes = 1_MiB, .max_capacity_bytes = 4_MiB, .compaction_parts = kind.parts},
          make_host_device());
      std::vector<std::pair<Handle, std::uint64_t>> live;
      std::vector<Handle> all;
      for (int i = 0; i < 300; ++i) all.push_back(pool->allocate(4_KiB + 1_KiB * (i % 9)));
      for (int i = 0; i < 300; ++i) {
        if (i % 3 == 0 || (kind.options.release_empty_segments && i > 100 && i % 4 != 0)) {
          pool->free(all[i]);
        } else {
          write_pattern(*pool, all[i], 100 + i);
          live.emplace_back(all[i], 100 + i);
        }
      }
      if (kind.pin) pool->pin(live[40].first);
      return std::make_pair(std::move(pool), std::move(live));
    };
    REQUIRE(build().first->statistics().segments >= 2);
    int failures = 0;
    for (long long k = 0;; ++k) {
      INFO("host allocations fail from the " << k << "th of the compaction on");
      auto [pool, live] = build();
      // bad_alloc, or device_error when a part could not run
      const bool failed = run_out_of_memory_from(k, [&, &pool = pool] { pool->compact(kind.options); });
      for (const auto& [handle, key] : live) REQUIRE(holds_pattern(*pool, handle, key));
      pool->check_invariants();
      // The pool works on once memory is back: a compaction then completes.
      pool->compact(kind.options);
      for (const auto& [handle, key] : live) REQUIRE(holds_pattern(*pool, handle, key));
      if (!failed) break;
      ++failures;
    }
    INFO("compactions that ran out of host memory: " << failures);
    if (can_fail_host_allocations) CHECK(failures > 5);
  }
}

TEST_CASE("a heap rebuild after reserve_rebuild allocates nothing", "[heap][host-memory]") {
  Heap heap(1_MiB, 256);
  for (int i = 0; i < 1000; ++i) REQUIRE(heap.allocate(512, 256, static_cast<std::uint32_t>(i)));
  // 1,000 blocks of 512 bytes apart by 256 free bytes each: the most free blocks a rebuild can have.
  std::vector<HeapPlacement> placements;
  for (std::uint32_t i = 0; i < 1000; ++i) placements.push_back({768ull * i + 256, 512, i});
  heap.reserve_rebuild(placements.size());
  std::vector<BlockId> ids;
  ids.reserve(placements.size());
  CHECK_FALSE(run_out_of_memory_from(0, [&] { heap.rebuild(placements, ids); }));
  heap.check_invariants();
  CHECK(heap.free_ranges() == 1001);
  CHECK(ids.size() == 1000);
  CHECK(heap.block(ids[999]).offset == 768ull * 999 + 256);
}

TEST_CASE("an allocation that compacts a hole first and runs out of host memory for good loses no byte",
          "[compaction][host-memory]") {
  // No growth: the 200 KiB request fits only in a hole that a compaction makes. Every allocation
  // from the k-th on fails; the request then fails, or succeeds with the compaction applied.
  const auto build = [] {
    auto pool = std::make_unique<Pool>(PoolOptions{.capacity_bytes = 1_MiB, .free_cache_bytes = 0},
                                       make_host_device());
    std::vector<std::pair<Handle, std::uint64_t>> live;
    std::vector<Handle> all;
    for (int i = 0; i < 120; ++i) all.push_back(pool->allocate(8_KiB));
    for (int i = 0; i < 120; ++i) {
      if (i % 3 == 0) {
        pool->free(all[i]);
      } else {
        write_pattern(*pool, all[i], 7 + i);
        live.emplace_back(all[i], 7 + i);
      }
    }
    return std::make_pair(std::move(pool), std::move(live));
  };
  int failures = 0;
  for (long long k = 0;; ++k) {
    INFO("host allocations fail from the " << k << "th of the allocation on");
    auto [pool, live] = build();
    const std::size_t live_before = pool->statistics().live_allocations;
    const bool failed =
        run_out_of_memory_from(k, [&, &pool = pool, &live = live] { live.emplace_back(pool->allocate(200_KiB), 0); });
    if (!failed) {
      CHECK(pool->statistics().compactions == 1);
      write_pattern(*pool, live.back().first, 0);
    }
    CHECK(pool->statistics().live_allocations == live_before + (failed ? 0 : 1));
    for (const auto& [handle, key] : live) REQUIRE(holds_pattern(*pool, handle, key));
    pool->check_invariants();
    if (!failed) break;
    ++failures;
  }
  INFO("allocations that ran out of host memory: " << failures);
  if (can_fail_host_allocations) CHECK(failures > 3);
}

TEST_CASE("a mixed workload that runs out of host memory for good at any point loses no byte",
          "[pool][host-memory]") {
  // Allocations and frees, a pin, an arena, a full compaction, an allocation that compacts a hole
  // first, a planned batch, growth, a compaction releasing segments. Every host allocation from the k-th on fails,
  // for every k; the workload stops at the first error. The buffers known to be written then hold
  // their bytes, the invariants hold, and with memory back the pool allocates and compacts.
  struct Live {
    Handle handle;
    std::uint64_t key;
  };
  const auto workload = [](Pool& pool, std::vector<Live>& live) {
    const auto add = [&](std::uint64_t bytes, std::uint64_t key) {
      const Handle handle = pool.allocate(bytes);
      write_pattern(pool, handle, key);
      live.push_back({handle, key});
    };
    for (std::uint64_t i = 0; i < 30; ++i) add(4_KiB + 512 * (i % 5), 10 + i);
    for (std::size_t i = 0; i < live.size(); i += 3) pool.free(live[i].handle);
    std::erase_if(live, [&](const Live& entry) { return !pool.valid(entry.handle); });
    pool.pin(live[5].handle);
    {
      ScopedArena arena(pool, 32_KiB, "stage");
      pool.compact({.release_empty_segments = false});
      pool.unpin(live[5].handle);
      add(120_KiB, 99);  // needs a hole: the arena stays where it is
    }
    {
      MemoryPlan plan({"load", "filter", "store"});
      plan.add_buffer({.name = "input", .bytes = 24_KiB, .first_stage = "load", .last_stage = "filter"});
      plan.add_buffer({.name = "output", .bytes = 24_KiB, .first_stage = "filter", .last_stage = "store"});
      const PlanSolution solution = solve(plan);
      PlannedBatch batch(pool, plan, solution);
      batch.enter_stage("filter");
      pool.compact({.release_empty_segments = false});  // the batch's region stays where it is
    }
    add(512_KiB, 100);  // needs growth
    pool.free(live.back().handle);
    live.pop_back();
    pool.compact();
  };
  {  // the workload runs whole without failures, and exercises what it says
    Pool pool({.capacity_bytes = 256_KiB, .max_capacity_bytes = 2_MiB, .free_cache_bytes = 0}, make_host_device());
    std::vector<Live> live;
    workload(pool, live);
    CHECK(pool.statistics().compactions >= 4);
  }
  int failures = 0;
  for (long long k = 0;; ++k) {
    INFO("host allocations fail from the " << k << "th of the workload on");
    Pool pool({.capacity_bytes = 256_KiB, .max_capacity_bytes = 2_MiB, .free_cache_bytes = 0}, make_host_device());
    std::vector<Live> live;
    live.reserve(64);  // the test's own list never allocates inside the walk
    const bool failed = run_out_of_memory_from(k, [&] { workload(pool, live); });
    for (const Live& entry : live) REQUIRE(holds_pattern(pool, entry.handle, entry.key));
    pool.check_invariants();
    const Handle more = pool.allocate(64_KiB);
    pool.compact();
    for (const Live& entry : live) REQUIRE(holds_pattern(pool, entry.handle, entry.key));
    pool.free(more);
    if (!failed) break;
    ++failures;
  }
  INFO("workloads that ran out of host memory: " << failures);
  if (can_fail_host_allocations) CHECK(failures > 20);
}
