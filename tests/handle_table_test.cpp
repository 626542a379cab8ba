// HandleTable: slots, generations and the state a released slot is left in.
#include <catch2/catch.hpp>

#include <stdexcept>

#include <vramkit/errors.hpp>

#include "handles/handle_table.hpp"

using namespace vramkit;

TEST_CASE("a released slot comes back with no block, pins or pending uses, and its old handle is stale",
          "[handles]") {
  HandleTable table;
  const std::uint32_t slot = table.acquire(1000, 1024, 256, SlotKind::buffer);
  const Handle old = table.handle_of(slot);
  CHECK(table[slot].block == no_block);  // not placed yet
  table[slot].block = 7;
  table[slot].pins = 2;
  table[slot].pending_uses = 1;
  table[slot].free_when_unpinned = true;
  table.check_invariants();
  table.release(slot);
  table.check_invariants();
  CHECK_FALSE(table.valid(old));
  CHECK_THROWS_AS(table.check(old), invalid_handle);

  // acquire() writes only the request's fields: the rest is as release() left it.
  const std::uint32_t again = table.acquire(64, 256, 512, SlotKind::arena);
  REQUIRE(again == slot);
  const Slot& entry = table[again];
  CHECK(entry.bytes == 64);
  CHECK(entry.block_bytes == 256);
  CHECK(entry.alignment == 512);
  CHECK(entry.kind == SlotKind::arena);
  CHECK(entry.block == no_block);
  CHECK(entry.pins == 0);
  CHECK(entry.pending_uses == 0);
  CHECK_FALSE(entry.free_when_unpinned);
  CHECK(table.check(table.handle_of(again)) == again);
  CHECK(table.live_count() == 1);
  table.check_invariants();
}

TEST_CASE("handle table invariant check names a free slot that keeps a block", "[handles]") {
  HandleTable table;
  const std::uint32_t first = table.acquire(256, 256, 256, SlotKind::buffer);
  const std::uint32_t second = table.acquire(256, 256, 256, SlotKind::buffer);
  table.release(first);
  table.check_invariants();
  table[first].block = 3;  // what acquire() would hand to the next request as "not placed"
  CHECK_THROWS_WITH(table.check_invariants(), Catch::Contains("free slot 0"));
  table[first].block = no_block;
  table[second].live = false;  // neither live nor on the free list
  CHECK_THROWS_WITH(table.check_invariants(), Catch::Contains("slot 1 is neither live nor free"));
}
