// ScopedArena on the host device: bump allocation, overflow, alignment, LIFO nesting and its misuse,
// release to the pool, and the compactor planning around arena memory.
#include <catch2/catch.hpp>

#include <numeric>
#include <vector>

#include <vramkit/host_device.hpp>
#include <vramkit/scoped_arena.hpp>
#include <vramkit/units.hpp>

using namespace vramkit;
using Catch::Matchers::Contains;

namespace {

std::vector<std::uint32_t> iota_from(std::uint32_t first, std::size_t count) {
  std::vector<std::uint32_t> values(count);
  std::iota(values.begin(), values.end(), first);
  return values;
}

}  // namespace

TEST_CASE("arena overflow names the arena, the request and what is left; earlier data is intact", "[arena]") {
  Pool pool({.capacity_bytes = 4_MiB}, make_host_device());
  ScopedArena arena(pool, 64_KiB, "frame");
  ArenaBuffer<std::uint32_t> first = arena.allocate<std::uint32_t>(4096);   // 16 KiB
  ArenaBuffer<std::uint32_t> second = arena.allocate<std::uint32_t>(8192);  // 32 KiB
  first.upload(iota_from(7, 4096));
  second.upload(iota_from(100000, 8192));
  const std::uint64_t used = arena.used_bytes();
  CHECK(used == 48_KiB);

  try {
    (void)arena.allocate<std::uint32_t>(8192);
    FAIL("an allocation past the arena's end must throw");
  } catch (const arena_exhausted& error) {
    const std::string what = error.what();
    CHECK_THAT(what, Contains("'frame'"));
    CHECK_THAT(what, Contains("32 KiB (32768 bytes"));
    CHECK_THAT(what, Contains("16 KiB (16384 bytes) left of 64 KiB"));
  }
  CHECK_THROWS_AS(arena.allocate<std::byte>(16_KiB + 1), out_of_memory);  // arena_exhausted is one
  CHECK(arena.used_bytes() == used);
  CHECK(first.to_vector() == iota_from(7, 4096));
  CHECK(second.to_vector() == iota_from(100000, 8192));
  // Exactly what is left still fits.
  CHECK(arena.allocate<std::byte>(16_KiB).bytes() == 16_KiB);
  CHECK(arena.remaining_bytes() == 0);
}

TEST_CASE("arena views are aligned, disjoint, and read and written through the device", "[arena]") {
  Pool pool({.capacity_bytes = 4_MiB}, make_host_device());
  ScopedArena arena(pool, 1_MiB, "scratch");
  REQUIRE(arena.address() % 256 == 0);
  ArenaBuffer<std::uint8_t> odd = arena.allocate<std::uint8_t>(3, 1);
  CHECK(odd.offset() == 0);
  ArenaBuffer<double> doubles = arena.allocate<double>(5, 1);  // raised to alignof(double)
  CHECK(doubles.address() % alignof(double) == 0);
  CHECK(doubles.address() >= odd.address() + odd.bytes());
  ArenaBuffer<float> page = arena.allocate<float>(10, 4096);
  CHECK(page.address() % 4096 == 0);
  CHECK(arena.used_bytes() == page.offset() + page.bytes());
  CHECK_THROWS_AS(arena.allocate<float>(1, 12), invalid_argument);
  // Checked as asked, before alignof(T) raises it, and nothing changes.
  const std::uint64_t used = arena.used_bytes();
  CHECK_THROWS_WITH(arena.allocate<float>(4, 0), Catch::Contains("alignment 0"));
  CHECK_THROWS_WITH(arena.allocate<float>(4, 3), Catch::Contains("alignment 3"));
  CHECK_THROWS_WITH(arena.image<double>(4, 4, 3), Catch::Contains("alignment 3"));
  CHECK(arena.used_bytes() == used);

  // On the host device an address is a host pointer: the view's pointer and the copies agree.
  page.upload(std::vector<float>(10, 2.5f));
  CHECK(page.data()[9] == 2.5f);
  page.data()[0] = -1.0f;
  CHECK(page.to_vector()[0] == -1.0f);
  CHECK_THROWS_AS(page.upload(std::vector<float>(11)), invalid_argument);

  ArenaImage<std::uint16_t> image = arena.image<std::uint16_t>(100, 3);  // 200 bytes a row -> 256
  CHECK(image.pitch_bytes() == 256);
  CHECK(image.bytes() == 768);
  CHECK(image.address() % 256 == 0);
  std::vector<std::uint16_t> pixels(300);
  std::iota(pixels.begin(), pixels.end(), std::uint16_t{1});
  image.upload(pixels);
  CHECK(image.to_vector() == pixels);
  CHECK(image.view().at(5, 2) == 206);
}

TEST_CASE("reset rewinds the bump pointer; statistics keep the high water", "[arena]") {
  Pool pool({.capacity_bytes = 4_MiB}, make_host_device());
  ScopedArena arena(pool, 256_KiB, "batch");
  const std::uint64_t first_address = arena.allocate<float>(1000).address();
  (void)arena.allocate<float>(20000);
  const ArenaStatistics before = arena.statistics();
  CHECK(before.capacity_bytes == 256_KiB);
  CHECK(before.allocations == 2);
  arena.reset();
  CHECK(arena.used_bytes() == 0);
  CHECK(arena.high_water_bytes() == before.used_bytes);
  CHECK(arena.statistics().resets == 1);
  CHECK(arena.allocate<float>(10).address() == first_address);  // the same bytes, next batch
}

TEST_CASE("release gives the arena's region back to the pool", "[arena]") {
  Pool pool({.capacity_bytes = 4_MiB}, make_host_device());
  const PoolStatistics empty = pool.statistics();
  {
    ScopedArena arena(pool, 1_MiB, "stage");
    const PoolStatistics held = pool.statistics();
    CHECK(held.used_bytes == 1_MiB);
    CHECK(held.pinned_allocations == 1);
    CHECK(held.live_allocations == 1);
  }
  CHECK(pool.statistics().used_bytes == empty.used_bytes);
  CHECK(pool.statistics().pinned_allocations == 0);
  CHECK(pool.statistics().live_allocations == 0);

  ScopedArena arena(pool, 1_MiB, "explicit");
  ArenaBuffer<int> view = arena.allocate<int>(4);
  arena.release();
  CHECK(arena.released());
  CHECK(pool.statistics().used_bytes == 0);
  CHECK_THROWS_AS(view.upload(std::vector<int>(4)), invalid_handle);  // stale, not reused memory
  CHECK_THROWS_AS(arena.allocate<int>(1), state_error);
  arena.release();  // a second release does nothing
}

TEST_CASE("nested arenas carve from the parent's top and give it back in LIFO order", "[arena]") {
  Pool pool({.capacity_bytes = 4_MiB}, make_host_device());
  ScopedArena frame(pool, 1_MiB, "frame");
  ArenaBuffer<std::uint32_t> kept = frame.allocate<std::uint32_t>(1000);
  kept.upload(iota_from(1, 1000));
  const std::uint64_t frame_used = frame.used_bytes();
  CHECK_THROWS_WITH(ScopedArena(frame, 0, "empty"), Catch::Contains("0 bytes"));
  CHECK(frame.used_bytes() == frame_used);
  CHECK(frame.statistics().live_children == 0);
  {
    ScopedArena scratch(frame, 256_KiB, "scratch");
    CHECK(scratch.address() >= frame.address() + frame_used);
    CHECK(frame.used_bytes() >= frame_used + 256_KiB);
    CHECK(frame.statistics().live_children == 1);
    ArenaBuffer<std::uint32_t> temp = scratch.allocate<std::uint32_t>(1000);
    temp.upload(iota_from(5000, 1000));
    CHECK_THROWS_AS(scratch.allocate<std::byte>(256_KiB), arena_exhausted);
    // The parent's top belongs to the child: no plain allocations, no reset.
    CHECK_THROWS_AS(frame.allocate<int>(1), state_error);
    CHECK_THROWS_AS(frame.reset(), state_error);
    CHECK_THROWS_AS(ScopedArena(frame, 2_MiB, "too big"), arena_exhausted);
    CHECK(temp.to_vector() == iota_from(5000, 1000));
  }
  CHECK(frame.used_bytes() == frame_used);
  CHECK(frame.statistics().live_children == 0);
  CHECK(kept.to_vector() == iota_from(1, 1000));
  CHECK(frame.allocate<int>(1).offset() >= frame_used);
}

TEST_CASE("LIFO misuse: release out of order throws; destruction out of order is reported by the parent",
          "[arena]") {
  Pool pool({.capacity_bytes = 4_MiB}, make_host_device());
  ScopedArena parent(pool, 1_MiB, "parent");
  const std::uint64_t start = parent.used_bytes();

  SECTION("explicit release out of order throws and changes nothing") {
    ScopedArena first(parent, 64_KiB, "first");
    ScopedArena second(parent, 64_KiB, "second");
    CHECK_THROWS_WITH(first.release(),
                      Contains("'first'") && Contains("out of order") && Contains("'second'"));
    CHECK_FALSE(first.released());
    CHECK_THROWS_WITH(parent.release(), Contains("'second'") && Contains("still lives"));
    second.release();
    first.release();
    CHECK(parent.used_bytes() == start);
  }

  SECTION("a child destroyed out of order is recorded; the parent's reset reports it once") {
    auto first = std::make_unique<ScopedArena>(parent, 64_KiB, "first");
    {
      ScopedArena second(parent, 64_KiB, "second");
      first.reset();                       // out of order: destructors never throw
      CHECK(parent.used_bytes() > start);  // 'first' keeps its bytes while 'second' lives above it
    }
    CHECK(parent.used_bytes() == start);  // both came back once the top went
    CHECK_THROWS_WITH(parent.reset(), Contains("'first'") && Contains("destroyed out of order"));
    parent.reset();  // reported once
  }

  SECTION("a parent destroyed before its child orphans the child") {
    auto middle = std::make_unique<ScopedArena>(parent, 128_KiB, "middle");
    ScopedArena child(*middle, 64_KiB, "child");
    CHECK_THROWS_AS(middle->release(), state_error);
    middle.reset();
    CHECK_THROWS_WITH(child.allocate<int>(1), Contains("'middle'") && Contains("destroyed first"));
    CHECK_THROWS_AS(child.release(), state_error);
    CHECK(parent.used_bytes() == start);
    CHECK_THROWS_WITH(parent.release(), Contains("'middle'") && Contains("'child'"));
  }
}

TEST_CASE("compaction never moves arena memory and moves ordinary buffers around it", "[arena]") {
  Pool pool({.capacity_bytes = 4_MiB}, make_host_device({.shuffle_seed = 3}));
  const Handle before = pool.allocate(1_MiB);
  ScopedArena arena(pool, 512_KiB, "pinned");
  const Handle after = pool.allocate(1_MiB);
  ArenaBuffer<std::uint32_t> data = arena.allocate<std::uint32_t>(64_KiB);
  data.upload(iota_from(42, 64_KiB));
  const std::vector<std::uint32_t> moved_values = iota_from(9, 1_MiB / 4);
  pool.write(after, gsl::as_bytes(gsl::span<const std::uint32_t>(moved_values)));
  const std::uint64_t arena_address = arena.address();
  const std::uint64_t after_address = pool.address(after);
  REQUIRE(pool.address(before) < arena_address);
  REQUIRE(after_address > arena_address);
  pool.free(before);

  const CompactionReport report = pool.compact();
  CHECK(report.blocks_moved >= 1);
  CHECK(arena.address() == arena_address);
  CHECK(data.address() == arena_address + data.offset());
  CHECK(data.to_vector() == iota_from(42, 64_KiB));
  CHECK(pool.address(after) != after_address);  // slid past the arena into the hole before it
  std::vector<std::uint32_t> read_back(moved_values.size());
  pool.read(after, gsl::as_writable_bytes(gsl::span<std::uint32_t>(read_back)));
  CHECK(read_back == moved_values);
  pool.check_invariants();
}
