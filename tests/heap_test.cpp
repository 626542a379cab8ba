// Heap: TLSF allocation, coalescing, alignment, traversal and exact statistics.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include <sys/resource.h>

#include <vramkit/errors.hpp>
#include <vramkit/heap.hpp>

using vramkit::Heap;

TEST_CASE("heap rejects a zero capacity, a capacity off the granularity and a granularity that is not a power of two",
          "[heap]") {
  CHECK_THROWS_AS(Heap(0), vramkit::invalid_argument);
  CHECK_THROWS_AS(Heap(1000, 256), vramkit::invalid_argument);
  CHECK_THROWS_AS(Heap(1024, 3), vramkit::invalid_argument);
  CHECK_THROWS_WITH(Heap(1024, 3), Catch::Contains("3"));
}

TEST_CASE("heap starts as one free range and serves a block at offset 0 rounded to the granularity", "[heap]") {
  Heap heap(1 << 20);
  CHECK(heap.free_ranges() == 1);
  CHECK(heap.largest_free_block() == 1 << 20);
  const auto block = heap.allocate(100, 256, 7);
  REQUIRE(block);
  CHECK(block->offset == 0);
  CHECK(block->bytes == 256);
  CHECK(heap.block(block->block).tag == 7);
  CHECK(heap.free_bytes() == (1 << 20) - 256);
  heap.check_invariants();
}

TEST_CASE("heap coalesces a freed block with both free neighbours", "[heap]") {
  Heap heap(4096);
  auto a = heap.allocate(1024, 256, 1), b = heap.allocate(1024, 256, 2), c = heap.allocate(1024, 256, 3);
  REQUIRE((a && b && c));
  heap.free(a->block);
  heap.free(c->block);
  CHECK(heap.free_ranges() == 2);  // [0,1024) and [2048,4096)
  heap.free(b->block);
  CHECK(heap.free_ranges() == 1);
  CHECK(heap.largest_free_block() == 4096);
  heap.check_invariants();
}

TEST_CASE("heap honours alignments above the granularity and leaves the padding free", "[heap]") {
  Heap heap(1 << 20);
  REQUIRE(heap.allocate(256, 256, 1));
  const auto aligned = heap.allocate(1000, 4096, 2);
  REQUIRE(aligned);
  CHECK(aligned->offset % 4096 == 0);
  CHECK(aligned->offset == 4096);
  CHECK(heap.free_ranges() == 2);
  heap.check_invariants();
}

TEST_CASE("heap fails only when no free block can hold the request", "[heap]") {
  Heap heap(64 * 256);
  std::vector<vramkit::BlockId> blocks;
  for (int i = 0; i < 64; ++i) blocks.push_back(heap.allocate(256, 256, i)->block);
  CHECK_FALSE(heap.allocate(1, 256, 0));
  // Free a run of 3 blocks (768 bytes): a request of exactly 768 must succeed even though the
  // rounded-up size class search alone would miss it.
  heap.free(blocks[10]);
  heap.free(blocks[11]);
  heap.free(blocks[12]);
  CHECK_FALSE(heap.allocate(1024, 256, 0));
  const auto fit = heap.allocate(768, 256, 99);
  REQUIRE(fit);
  CHECK(fit->offset == 10 * 256);
  heap.check_invariants();
}

TEST_CASE("heap exact fit inside a non-power-of-two class is found by the scan of its own class", "[heap]") {
  const std::uint64_t units = 37;  // class with 5 second-level bits; 37 units is mid-class
  Heap heap(units * 256 * 4);
  auto a = heap.allocate(units * 256, 256, 1);
  auto guard = heap.allocate(256, 256, 2);
  REQUIRE((a && guard));
  heap.free(a->block);
  REQUIRE(heap.allocate(heap.largest_free_block(), 256, 3));  // the tail
  // Only the 37-unit hole remains free.
  REQUIRE(heap.free_ranges() == 1);
  CHECK(heap.allocate(units * 256, 256, 4));
  heap.check_invariants();
}

TEST_CASE("heap walks blocks in address order and rebuilds from placements", "[heap]") {
  Heap heap(8192);
  REQUIRE(heap.allocate(512, 256, 1));
  REQUIRE(heap.allocate(256, 256, 2));
  std::uint64_t cursor = 0;
  int blocks = 0;
  heap.for_each_block([&](const vramkit::HeapBlock& block) {
    CHECK(block.offset == cursor);
    cursor += block.bytes;
    ++blocks;
  });
  CHECK(cursor == 8192);
  CHECK(blocks == 3);
  const std::vector<vramkit::HeapPlacement> placements{{0, 512, 1}, {1024, 256, 2}};
  const auto ids = heap.rebuild(placements);
  REQUIRE(ids.size() == 2);
  CHECK(heap.block(ids[1]).offset == 1024);
  CHECK(heap.block(ids[1]).tag == 2);
  CHECK(heap.free_ranges() == 2);
  heap.check_invariants();
  const std::vector<vramkit::HeapPlacement> overlapping{{0, 512, 1}, {256, 256, 2}};
  CHECK_THROWS_AS(heap.rebuild(overlapping), std::logic_error);
}

TEST_CASE("heap rebuild after churn numbers blocks in address order and keeps exact statistics", "[heap]") {
  std::mt19937_64 rng(7);
  Heap heap(64 << 20);
  std::vector<vramkit::BlockId> live;
  for (int step = 0; step < 4000; ++step) {  // scatter the node storage: frees and reuse in random order
    if (live.empty() || rng() % 3 != 0) {
      if (const auto placed = heap.allocate(256 * (1 + rng() % 64), 256, static_cast<std::uint32_t>(step)))
        live.push_back(placed->block);
    } else {
      const std::size_t pick = rng() % live.size();
      heap.free(live[pick]);
      live[pick] = live.back();
      live.pop_back();
    }
  }
  auto snapshot = [&] {
    std::vector<std::tuple<std::uint64_t, std::uint64_t, bool, std::uint32_t>> blocks;
    heap.for_each_block([&](const vramkit::HeapBlock& block) {
      blocks.emplace_back(block.offset, block.bytes, block.free, block.free ? 0 : block.tag);
    });
    return blocks;
  };
  // A rejected rebuild (the second block off the granularity) changes nothing.
  const auto before = snapshot();
  const std::uint64_t free_before = heap.free_bytes();
  CHECK_THROWS_AS(heap.rebuild(std::vector<vramkit::HeapPlacement>{{0, 256, 1}, {1000, 256, 2}}),
                  std::logic_error);
  CHECK(snapshot() == before);
  CHECK(heap.free_bytes() == free_before);
  heap.check_invariants();

  // Slide every block down, as a full compaction does.
  std::vector<vramkit::HeapPlacement> placements;
  std::uint64_t cursor = 0;
  heap.for_each_block([&](const vramkit::HeapBlock& block) {
    if (block.free) return;
    placements.push_back({cursor, block.bytes, block.tag});
    cursor += block.bytes;
  });
  const auto ids = heap.rebuild(placements);
  heap.check_invariants();
  CHECK(heap.free_ranges() == 1);
  CHECK(heap.largest_free_block() == heap.capacity() - cursor);
  vramkit::BlockId previous = 0;
  std::size_t index = 0;
  heap.for_each_block([&](const vramkit::HeapBlock& block) {
    if (index > 0) CHECK(block.id > previous);  // node storage in address order
    previous = block.id;
    if (!block.free) {
      CHECK(block.id == ids[index]);
      CHECK(block.offset == placements[index].offset);
      CHECK(block.tag == placements[index].tag);
    }
    ++index;
  });
  // The rebuilt heap serves and frees as before.
  const auto more = heap.allocate(4096, 4096, 99);
  REQUIRE(more);
  heap.free(ids.front());
  heap.check_invariants();
}

// The packed rebuild that a full compaction's walk writes ahead (Heap::write_packed): the same
// heap as rebuild() gives from the same placements, and nothing changes before adopt_packed.
TEST_CASE("heap packed rebuild equals rebuild, shows nothing until adopted and refuses blocks that do not tile",
          "[heap]") {
  const std::uint64_t seed = std::random_device{}();
  std::cout << "heap packed rebuild seed " << seed << '\n';
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const bool full = GENERATE(false, true);  // the blocks end at the capacity: no free block after them
  Heap packed(16 << 20), rebuilt(16 << 20);
  std::vector<vramkit::BlockId> live;
  for (int step = 0; step < 3000; ++step) {  // the same churn in both heaps
    if (live.empty() || rng() % 3 != 0) {
      const std::uint64_t bytes = 256 * (1 + rng() % 32);
      const auto a = packed.allocate(bytes, 256, static_cast<std::uint32_t>(step));
      const auto b = rebuilt.allocate(bytes, 256, static_cast<std::uint32_t>(step));
      REQUIRE(a.has_value() == b.has_value());
      if (a) live.push_back(a->block);
    } else {
      const std::size_t pick = rng() % live.size();
      packed.free(live[pick]);
      rebuilt.free(live[pick]);
      live[pick] = live.back();
      live.pop_back();
    }
  }
  std::vector<vramkit::HeapPlacement> placements;
  std::uint64_t cursor = 0;
  packed.for_each_block([&](const vramkit::HeapBlock& block) {
    if (block.free) return;
    placements.push_back({cursor, block.bytes, block.tag});
    cursor += block.bytes;
  });
  if (full) {  // the last block grows to the end (a heap whose blocks fill it once packed)
    placements.back().bytes += packed.capacity() - cursor;
    cursor = packed.capacity();
  }
  REQUIRE(placements.size() > 100);
  auto snapshot = [](const Heap& heap) {
    std::vector<std::tuple<vramkit::BlockId, std::uint64_t, std::uint64_t, bool, std::uint32_t>> blocks;
    heap.for_each_block([&](const vramkit::HeapBlock& block) {
      blocks.emplace_back(block.id, block.offset, block.bytes, block.free, block.free ? 0 : block.tag);
    });
    return blocks;
  };
  const auto before = snapshot(packed);
  const auto statistics_before = packed.statistics();
  packed.prepare_packed(placements.size());
  for (std::size_t index = placements.size(); index-- > 0;)  // any order, as the walk's threads write them
    packed.write_packed(index, placements[index].offset, placements[index].bytes, placements[index].tag);
  CHECK(snapshot(packed) == before);  // written, not adopted
  // Blocks that do not end where the caller says, or none: refused, nothing changed.
  CHECK_THROWS_AS(packed.adopt_packed(placements.size(), cursor - 256), std::logic_error);
  CHECK_THROWS_WITH(packed.adopt_packed(placements.size(), cursor + 256), Catch::Contains(std::to_string(cursor + 256)));
  CHECK_THROWS_AS(packed.adopt_packed(0, 0), std::logic_error);
  CHECK(snapshot(packed) == before);
  CHECK(packed.statistics().free_bytes == statistics_before.free_bytes);
  packed.check_invariants();

  packed.adopt_packed(placements.size(), cursor);
  packed.check_invariants();
  const auto ids = rebuilt.rebuild(placements);
  CHECK(snapshot(packed) == snapshot(rebuilt));
  for (std::size_t index = 0; index < ids.size(); ++index) REQUIRE(ids[index] == index);
  const auto a = packed.statistics(), b = rebuilt.statistics();
  CHECK(a.free_bytes == b.free_bytes);
  CHECK(a.free_ranges == b.free_ranges);
  CHECK(a.allocated_blocks == b.allocated_blocks);
  CHECK(a.largest_free_block == b.largest_free_block);
  CHECK(a.sum_of_squared_free == b.sum_of_squared_free);
  // Both serve and free alike afterwards, and a second packed rebuild reuses the replaced nodes.
  for (int step = 0; step < 200; ++step) {
    const auto x = packed.allocate(256 * (1 + step % 7), 256, 1000u + step);
    const auto y = rebuilt.allocate(256 * (1 + step % 7), 256, 1000u + step);
    REQUIRE(x.has_value() == y.has_value());
    if (x) CHECK(x->offset == y->offset);
    if (step % 3 == 0) {
      packed.free(ids[step]);
      rebuilt.free(ids[step]);
    }
  }
  packed.check_invariants();
  CHECK(snapshot(packed) == snapshot(rebuilt));
}

TEST_CASE("heap allocate_at claims exactly the range asked for, inside one free block", "[heap]") {
  Heap heap(8192);
  const auto at = heap.allocate_at(1024, 512, 5);
  REQUIRE(at);
  CHECK(at->offset == 1024);
  CHECK_FALSE(heap.allocate_at(1280, 256, 6));  // inside the block just claimed
  CHECK_FALSE(heap.allocate_at(100, 256, 6));   // not on the granularity
  heap.check_invariants();
}

// The reference: a sorted map of live ranges. After every step the heap's blocks, statistics and
// non-overlap are compared with what the reference computes.
TEST_CASE("heap matches a reference model over 100,000 random allocations and frees", "[heap][random]") {
  const std::uint64_t seed = std::random_device{}();
  std::cout << "heap random test seed " << seed << '\n';
  INFO("seed " << seed);
  std::mt19937_64 random(seed);
  const std::uint64_t capacity = 64ull << 20;
  Heap heap(capacity);
  struct Live {
    vramkit::BlockId block;
    std::uint64_t bytes;
  };
  std::map<std::uint64_t, Live> live;  // offset -> block
  std::uint64_t used = 0;
  std::uniform_real_distribution<double> log_size(std::log(1.0), std::log(2.0 * (1 << 20)));
  for (int step = 0; step < 100000; ++step) {
    const bool allocate = live.empty() || random() % 100 < 55;
    if (allocate) {
      const auto bytes = static_cast<std::uint64_t>(std::exp(log_size(random)));
      const std::uint64_t alignment = std::uint64_t{256} << (random() % 8 == 0 ? random() % 6 : 0);
      const auto block = heap.allocate(bytes, alignment, static_cast<std::uint32_t>(step));
      if (!block) {
        // Fails only if no free range fits the request with its alignment.
        std::uint64_t cursor = 0;
        bool fits = false;
        auto consider = [&](std::uint64_t start, std::uint64_t end) {
          const std::uint64_t aligned = (start + alignment - 1) / alignment * alignment;
          fits |= aligned < end && end - aligned >= (bytes + 255) / 256 * 256;
        };
        for (const auto& [offset, entry] : live) {
          consider(cursor, offset);
          cursor = offset + entry.bytes;
        }
        consider(cursor, capacity);
        REQUIRE_FALSE(fits);
        continue;
      }
      REQUIRE(block->offset % alignment == 0);
      REQUIRE(block->bytes == (bytes + 255) / 256 * 256);
      auto next = live.lower_bound(block->offset);
      if (next != live.end()) REQUIRE(block->offset + block->bytes <= next->first);
      if (next != live.begin()) {
        auto previous = std::prev(next);
        REQUIRE(previous->first + previous->second.bytes <= block->offset);
      }
      live.emplace(block->offset, Live{block->block, block->bytes});
      used += block->bytes;
    } else {
      auto victim = live.begin();
      std::advance(victim, static_cast<long>(random() % live.size()));
      heap.free(victim->second.block);
      used -= victim->second.bytes;
      live.erase(victim);
    }
    // Statistics against the reference.
    std::uint64_t cursor = 0, free_ranges = 0, largest = 0;
    double squares = 0;
    auto gap = [&](std::uint64_t start, std::uint64_t end) {
      if (end > start) {
        ++free_ranges;
        largest = std::max(largest, end - start);
        squares += static_cast<double>(end - start) * static_cast<double>(end - start);
      }
    };
    for (const auto& [offset, entry] : live) {
      gap(cursor, offset);
      cursor = offset + entry.bytes;
    }
    gap(cursor, capacity);
    const auto statistics = heap.statistics();
    REQUIRE(statistics.used_bytes == used);
    REQUIRE(statistics.free_bytes == capacity - used);
    REQUIRE(statistics.free_ranges == free_ranges);
    REQUIRE(statistics.largest_free_block == largest);
    REQUIRE(statistics.allocated_blocks == live.size());
    REQUIRE(statistics.sum_of_squared_free == Approx(squares).epsilon(1e-12));
    if (step % 1000 == 0) heap.check_invariants();
  }
  heap.check_invariants();
}

// Good fit alone skips the request's own size class (not every block of it fits) and would cut the
// request out of a larger block of a higher class; allocate looks at the own class first.
TEST_CASE("heap prefers a block of the request's own size class: exact size, else the smallest that fits",
          "[heap]") {
  const std::uint64_t unit = 256;
  // Classes of 16 units from 512 units up: 1000, 1002 and 1005 units share the class 992..1007.
  Heap heap(8192 * unit);
  std::vector<vramkit::BlockId> holes;
  std::vector<std::uint64_t> offsets;
  for (const std::uint64_t units : {995, 1005, 1002}) {
    const auto hole = heap.allocate(units * unit, unit, 1);
    REQUIRE(heap.allocate(unit, unit, 2));  // keeps the holes apart
    holes.push_back(hole->block);
    offsets.push_back(hole->offset);
  }
  for (const auto block : holes) heap.free(block);
  heap.check_invariants();
  // 1000 units: 995 is too small, 1002 the smallest that fits (not the large free tail).
  const auto first = heap.allocate(1000 * unit, unit, 3);
  REQUIRE(first);
  CHECK(first->offset == offsets[2]);
  // 1005 units: exactly the 1005-unit hole.
  const auto second = heap.allocate(1005 * unit, unit, 4);
  REQUIRE(second);
  CHECK(second->offset == offsets[1]);
  // 1001 units: nothing of the class fits any more (995 units): the tail serves it.
  const auto third = heap.allocate(1001 * unit, unit, 5);
  REQUIRE(third);
  CHECK(third->offset > offsets[2]);
  heap.check_invariants();
  CHECK(heap.free_ranges() == 3);  // the 995-unit hole, the 2 units left of the 1002 and the tail
}

TEST_CASE("a heap's packed nodes reserved ahead are written without page faults", "[heap]") {
  // Heap::reserve_packed writes the room of the nodes after a compaction's slide once, so that the
  // threads that write them later (Pool::write_slide) take no page faults in them. Counted by this
  // thread's minor faults while it writes every node; a heap whose room was only sized (prepare_packed)
  // is counted beside it, for the record (transparent huge pages may take it below the page count).
  constexpr std::size_t count = 200000;
  const auto faults_writing = [&](bool reserve) {
    Heap heap(std::uint64_t{1} << 40);
    reserve ? heap.reserve_packed(count) : heap.prepare_packed(count);
    rusage before{}, after{};
    getrusage(RUSAGE_THREAD, &before);
    for (std::size_t k = 0; k < count; ++k) heap.write_packed(k, 256 * k, 256, static_cast<std::uint32_t>(k));
    getrusage(RUSAGE_THREAD, &after);
    return after.ru_minflt - before.ru_minflt;
  };
  const long sized = faults_writing(false);
  const long reserved = faults_writing(true);
  const long pages = static_cast<long>(count * 40 / 4096);  // a node is at least 40 bytes
  std::printf("writing %zu packed nodes: %ld minor faults sized only, %ld reserved (%ld pages at least)\n", count,
              sized, reserved, pages);
  CHECK(reserved < pages / 16);
}
