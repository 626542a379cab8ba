// Guard margins (PoolOptions::guard_bytes): a write past a buffer's end is reported by check_guards,
// free and compact with the buffer's slot, size, offset and first bad byte; a compaction that finds a
// corrupt margin moves nothing; without the option no block carries a margin.
#include <catch2/catch.hpp>

#include <cstring>

#include <vramkit/host_device.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/units.hpp>

#include "support/patterns.hpp"

using namespace vramkit;
using vramkit_test::holds_pattern;
using vramkit_test::write_pattern;

namespace {

// Writes `bytes` bytes of `value` through the raw (host) pointer at `past_end` bytes after the end.
void scribble_past_end(Pool& pool, Handle handle, std::uint64_t past_end, std::uint64_t bytes = 1,
                       unsigned char value = 0x11) {
  const std::uint64_t address = pool.pin(handle);
  auto* data = reinterpret_cast<unsigned char*>(static_cast<std::uintptr_t>(address));
  std::memset(data + pool.size(handle) + past_end, value, bytes);
  pool.unpin(handle);
}

std::vector<std::uint64_t> addresses(const Pool& pool, const std::vector<Handle>& handles) {
  std::vector<std::uint64_t> result;
  for (const Handle handle : handles) result.push_back(pool.address(handle));
  return result;
}

}  // namespace

TEST_CASE("a guard margin as large as the pool is rejected", "[guard][errors]") {
  auto device = make_host_device();
  for (const std::uint64_t guard : {1_MiB, 2_MiB, ~std::uint64_t{0}}) {
    try {
      Pool pool({.capacity_bytes = 1_MiB, .guard_bytes = guard}, device);
      FAIL("guard_bytes " << guard << " accepted");
    } catch (const vramkit::invalid_argument& error) {
      CHECK_THAT(error.what(), Catch::Contains(std::to_string(guard)) && Catch::Contains("1048576"));
    }
  }
  CHECK_NOTHROW(Pool({.capacity_bytes = 1_MiB, .guard_bytes = 1_MiB - 256}, device));
}

TEST_CASE("without guard margins a block is the request rounded up to the granularity", "[guard]") {
  Pool pool({.capacity_bytes = 1_MiB}, make_host_device());
  CHECK(pool.options().guard_bytes == 0);
  const Handle a = pool.allocate(1000);
  const Handle b = pool.allocate(256);
  const Handle c = pool.allocate(257);
  const auto map = pool.block_map();
  REQUIRE(map.size() == 4);  // three blocks and the free tail
  CHECK(map[0].bytes == 1024);
  CHECK(map[1].bytes == 256);
  CHECK(map[2].bytes == 512);
  CHECK(pool.statistics().used_bytes == 1024 + 256 + 512);
  // Writing past the end goes unnoticed: nothing is checked.
  scribble_past_end(pool, b, 0);
  CHECK_NOTHROW(pool.check_guards());
  pool.free(a);
  pool.free(b);
  pool.free(c);
}

TEST_CASE("guard margins are rounded up to the granularity and follow every block", "[guard]") {
  Pool pool({.capacity_bytes = 1_MiB, .guard_bytes = 100}, make_host_device());
  CHECK(pool.options().guard_bytes == 256);
  const Handle a = pool.allocate(1000);  // 1000 + 256 -> 1280
  const Handle b = pool.allocate(256);   // 256 + 256 -> 512
  const auto map = pool.block_map();
  CHECK(map[0].bytes == 1280);
  CHECK(map[1].bytes == 512);
  write_pattern(pool, a, 1);
  write_pattern(pool, b, 2);
  CHECK_NOTHROW(pool.check_guards());
  pool.compact();
  CHECK_NOTHROW(pool.check_guards());
  pool.free(a);
  pool.free(b);
  pool.check_invariants();
}

TEST_CASE("a write past the end is reported by check_guards with slot, size, offset and first bad byte",
          "[guard]") {
  Pool pool({.capacity_bytes = 1_MiB, .guard_bytes = 256}, make_host_device());
  const Handle first = pool.allocate(4096);
  const Handle victim = pool.allocate(1000);
  const auto map = pool.block_map();
  REQUIRE(map[1].slot == victim.slot);
  scribble_past_end(pool, victim, 3);
  try {
    pool.check_guards();
    FAIL("expected corruption_error");
  } catch (const corruption_error& error) {
    const std::string text = error.what();
    INFO(text);
    CHECK_THAT(text, Catch::Contains("slot " + std::to_string(victim.slot)));
    CHECK_THAT(text, Catch::Contains("(1000 bytes"));
    CHECK_THAT(text, Catch::Contains("offset " + std::to_string(map[1].offset)));
    CHECK_THAT(text, Catch::Contains("first bad byte at buffer offset 1003, 3 bytes past its end"));
  }
  CHECK(pool.valid(first));
}

TEST_CASE("free reports a corrupt margin and keeps the buffer; the destructor path still releases it",
          "[guard]") {
  Pool pool({.capacity_bytes = 1_MiB, .guard_bytes = 64}, make_host_device());
  const Handle handle = pool.allocate(500);
  scribble_past_end(pool, handle, 0);
  CHECK_THROWS_AS(pool.free(handle), corruption_error);
  CHECK_THROWS_WITH(pool.free(handle), Catch::Contains("buffer offset 500, 0 bytes past its end"));
  CHECK(pool.valid(handle));
  CHECK(pool.release(handle));  // releasing never throws
  CHECK_FALSE(pool.valid(handle));
  CHECK(pool.statistics().live_allocations == 0);
  pool.check_invariants();
}

TEST_CASE("the last byte of a margin is checked too", "[guard]") {
  Pool pool({.capacity_bytes = 1_MiB, .guard_bytes = 256}, make_host_device());
  const Handle handle = pool.allocate(256);
  scribble_past_end(pool, handle, 255);
  CHECK_THROWS_WITH(pool.check_guards(), Catch::Contains("buffer offset 511, 255 bytes past its end"));
}

TEST_CASE("compaction refuses to move anything while a margin is corrupt", "[guard][compaction]") {
  Pool pool({.capacity_bytes = 256_KiB, .guard_bytes = 256}, make_host_device());
  std::vector<Handle> all, kept;
  for (int i = 0; i < 16; ++i) all.push_back(pool.allocate(10_KiB + 100 * i));
  for (int i = 0; i < 16; ++i) {
    if (i % 2 == 0) {
      pool.free(all[i]);
    } else {
      kept.push_back(all[i]);
      write_pattern(pool, all[i], i);
    }
  }
  const auto before = addresses(pool, kept);
  const auto statistics_before = pool.statistics();
  scribble_past_end(pool, kept[5], 17, 4);
  CHECK_THROWS_WITH(pool.compact(), Catch::Contains("slot " + std::to_string(kept[5].slot)) &&
                                        Catch::Contains("17 bytes past its end"));
  CHECK_THROWS_AS(pool.compact({.goal = CompactGoal::hole, .hole_bytes = 64_KiB}), corruption_error);
  CHECK(addresses(pool, kept) == before);
  CHECK(pool.statistics().bytes_moved == statistics_before.bytes_moved);
  CHECK(pool.statistics().free_ranges == statistics_before.free_ranges);
  // An allocation that would need a compaction fails with the same report and changes nothing.
  REQUIRE(pool.statistics().largest_free_block < 120_KiB);
  CHECK_THROWS_AS(pool.allocate(120_KiB), corruption_error);
  CHECK(addresses(pool, kept) == before);
  CHECK(pool.statistics().live_allocations == kept.size());
  pool.check_invariants();
  for (std::size_t i = 0; i < kept.size(); ++i) CHECK(holds_pattern(pool, kept[i], 2 * i + 1));
}

TEST_CASE("margins move with their blocks and stay intact through compaction and growth",
          "[guard][compaction]") {
  Pool pool({.capacity_bytes = 256_KiB, .max_capacity_bytes = 1_MiB, .guard_bytes = 32}, make_host_device());
  std::vector<Handle> handles;
  for (int i = 0; i < 40; ++i) handles.push_back(pool.allocate(7_KiB + 13 * i));
  REQUIRE(pool.statistics().segments > 1);
  for (int i = 0; i < 40; i += 2) pool.free(handles[i]);
  for (int i = 1; i < 40; i += 2) write_pattern(pool, handles[i], i);
  const auto report = pool.compact();
  CHECK(report.segments_released > 0);
  CHECK(report.blocks_moved > 0);
  CHECK_NOTHROW(pool.check_guards());
  for (int i = 1; i < 40; i += 2) CHECK(holds_pattern(pool, handles[i], i));
  // A corruption after the moves is still found at the block's new place.
  scribble_past_end(pool, handles[39], 1);
  CHECK_THROWS_WITH(pool.check_guards(), Catch::Contains("slot " + std::to_string(handles[39].slot)));
}
