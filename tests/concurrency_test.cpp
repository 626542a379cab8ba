// Concurrency: worker threads allocate, write, pin, read through raw pointers, verify and free while
// another thread compacts in a loop (full, hole and budgeted goals). Every buffer's bytes belong to
// its own key at every check: nothing is lost, mixed or moved while pinned. The pool has one mutex
// and runs copies pinned outside it, so nothing here may deadlock.
#include <catch2/catch.hpp>

#include <atomic>
#include <cstring>
#include <iostream>
#include <random>
#include <thread>

#include <vramkit/host_device.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/units.hpp>

#include "support/patterns.hpp"

using namespace vramkit;
using vramkit_test::holds_pattern;
using vramkit_test::pattern;
using vramkit_test::write_pattern;

namespace {

constexpr int worker_threads = 8;
constexpr int operations_per_worker = 1500;

struct Owned {
  Handle handle;
  std::uint64_t key;
};

// One worker's fixed sequence of operations; returns the number of wrong buffers it saw.
int run_worker(Pool& pool, int thread) {
  std::mt19937_64 random(static_cast<std::uint64_t>(thread) * 7919 + 1);
  std::vector<Owned> mine;
  int errors = 0;
  auto key_of = [&](int step) {
    return static_cast<std::uint64_t>(thread) << 32 | static_cast<std::uint64_t>(step);
  };
  for (int step = 0; step < operations_per_worker; ++step) {
    const unsigned choice = random() % 10;
    if (mine.empty() || (choice < 4 && mine.size() < 24)) {
      const Handle handle = pool.allocate(64 + random() % 12000, 256u << (random() % 3));
      const std::uint64_t key = key_of(step);
      write_pattern(pool, handle, key);
      mine.push_back({handle, key});
      continue;
    }
    Owned& owned = mine[random() % mine.size()];
    if (choice < 6) {  // verify through a copy, then free
      if (!holds_pattern(pool, owned.handle, owned.key)) ++errors;
      pool.free(owned.handle);
      owned = mine.back();
      mine.pop_back();
    } else if (choice < 8) {  // pin: read and rewrite through the raw pointer; the block must stay put
      const std::uint64_t address = pool.pin(owned.handle);
      const std::uint64_t bytes = pool.size(owned.handle);
      auto* data = reinterpret_cast<std::byte*>(static_cast<std::uintptr_t>(address));
      const auto expected = pattern(owned.key, bytes);
      if (std::memcmp(data, expected.data(), bytes) != 0) ++errors;
      const std::uint64_t key = key_of(step);
      const auto next = pattern(key, bytes);
      std::memcpy(data, next.data(), bytes);
      std::this_thread::yield();  // let the compactor run while this block is pinned
      if (pool.address(owned.handle) != address) ++errors;
      pool.unpin(owned.handle);
      owned.key = key;
    } else {  // rewrite through a copy and verify
      owned.key = key_of(step);
      write_pattern(pool, owned.handle, owned.key);
      if (!holds_pattern(pool, owned.handle, owned.key)) ++errors;
    }
  }
  for (const Owned& owned : mine) {
    if (!holds_pattern(pool, owned.handle, owned.key)) ++errors;
    pool.free(owned.handle);
  }
  return errors;
}

}  // namespace

TEST_CASE("8 threads allocate, pin, write, verify and free while another thread compacts in a loop",
          "[threads][compaction]") {
  const std::uint64_t guard = GENERATE(0u, 64u);
  INFO("guard bytes " << guard);
  Pool pool({.capacity_bytes = 4_MiB, .max_capacity_bytes = 16_MiB, .guard_bytes = guard},
            make_host_device({.shuffle_seed = 3}));
  std::atomic<int> errors{0};
  std::atomic<int> workers_left{worker_threads};
  std::atomic<std::uint64_t> compactions{0}, bytes_moved{0};
  std::thread compactor([&] {
    std::mt19937_64 random(99);
    while (workers_left.load() != 0) {
      CompactionReport report;
      switch (random() % 3) {
        case 0:
          report = pool.compact();
          break;
        case 1:
          report = pool.compact({.goal = CompactGoal::hole, .hole_bytes = 64_KiB + random() % 1_MiB});
          break;
        default:
          report = pool.compact({.max_bytes_moved = 256_KiB, .release_empty_segments = false});
          break;
      }
      if (guard != 0) pool.check_guards();
      ++compactions;
      bytes_moved += report.bytes_moved;
      std::this_thread::yield();  // leave the mutex to the workers between compactions
    }
  });
  std::vector<std::thread> workers;
  for (int thread = 0; thread < worker_threads; ++thread) {
    workers.emplace_back([&, thread] {
      errors += run_worker(pool, thread);
      --workers_left;
    });
  }
  for (auto& worker : workers) worker.join();
  compactor.join();
  std::cout << "threads: " << worker_threads << " x " << operations_per_worker << " operations, "
            << compactions.load() << " concurrent compactions moved " << bytes_moved.load()
            << " bytes (guard " << guard << ")\n";
  CHECK(errors == 0);
  CHECK(compactions > 0);
  const PoolStatistics statistics = pool.statistics();
  CHECK(statistics.live_allocations == 0);
  CHECK(statistics.used_bytes == 0);
  CHECK(statistics.pinned_allocations == 0);
  pool.check_invariants();
}
