// A full compaction's walk, plan and staging shared by threads: Heap::walk_starts cuts the
// address-ordered list where threads can start, a piece's count is what it holds
// (pool_detail::count_piece), make_slide_moves_in_parts stages exactly what
// make_slide_moves stages, and a pool whose walk and plan several threads share (Pool::plan_slide)
// moves exactly the blocks, to exactly the places, that compactor::plan_full gives, keeping every byte.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <cstring>
#include <iostream>
#include <random>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include <vramkit/errors.hpp>
#include <vramkit/heap.hpp>
#include <vramkit/host_device.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/units.hpp>

#include "compactor/chunk_plan_paths.hpp"
#include "pool/slide_place.hpp"
#include "support/patterns.hpp"
#include "support/pool_fixtures.hpp"

using namespace vramkit;

using vramkit_test::churned_heap;

TEST_CASE("walk starts are distinct blocks in address order, the first block first", "[parallel][heap]") {
  const std::uint64_t seed = std::random_device{}();
  std::cout << "walk starts: seed " << seed << "\n";
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 20; ++round) {
    const Heap heap = churned_heap(rng, static_cast<std::uint32_t>(rng() % 4000));
    std::vector<std::uint64_t> offsets;  // every block's, in address order
    std::set<BlockId> blocks;
    heap.for_each_block([&](const HeapBlock& block) {
      offsets.push_back(block.offset);
      blocks.insert(block.id);
    });
    for (std::size_t count : {std::size_t{1}, std::size_t{2}, std::size_t{7}, std::size_t{128}, std::size_t{100000}}) {
      INFO("round " << round << ", " << count << " starts asked, " << offsets.size() << " blocks");
      std::vector<BlockId> starts{42, 43};
      heap.walk_starts(count, starts);
      REQUIRE(!starts.empty());
      CHECK(starts.size() <= std::min(count, blocks.size()));
      CHECK(starts.front() == heap.first());
      for (std::size_t index = 0; index < starts.size(); ++index) {
        REQUIRE(blocks.contains(starts[index]));
        if (index > 0) REQUIRE(heap.block(starts[index - 1]).offset < heap.block(starts[index]).offset);
      }
      // Walking from each start up to the next visits every block once.
      std::vector<std::uint64_t> walked;
      for (std::size_t index = 0; index < starts.size(); ++index) {
        const BlockId end = index + 1 < starts.size() ? starts[index + 1] : no_block;
        for (BlockId id = starts[index]; id != end; id = heap.next(id)) walked.push_back(heap.block(id).offset);
      }
      REQUIRE(walked == offsets);
      // As many as asked, or as there are blocks, give or take the ids of spare nodes.
      CHECK(starts.size() >= std::min(count, blocks.size()) / 4);
    }
  }
  std::vector<BlockId> starts;
  CHECK_THROWS_AS(Heap(1_MiB).walk_starts(0, starts), invalid_argument);
}

namespace {

/// A slide of `count` moves over two segments, or (one time in three) the same with one move
/// turned so that it is not a slide: up, or overlapping the move before it.
std::vector<compactor::Move> random_moves(std::mt19937_64& rng, std::size_t count, bool& slide) {
  std::vector<compactor::Move> moves;
  std::array<std::uint64_t, 2> cursor{0, 0}, source{0, 0};
  for (std::size_t index = 0; index < count; ++index) {
    const std::uint32_t segment = index < count / 2 ? 0 : 1;
    source[segment] += 256 * (rng() % 4);  // a gap, or none
    const std::uint64_t bytes = rng() % 16 == 0 ? 0 : 256 * (1 + rng() % 300);
    const std::uint64_t from = std::max(source[segment], cursor[segment]);
    const std::uint64_t to = rng() % 8 == 0 ? from : cursor[segment];  // some copy nothing
    moves.push_back({.tag = static_cast<std::uint32_t>(index),
                     .from_segment = segment,
                     .from_offset = from,
                     .to_segment = segment,
                     .to_offset = to,
                     .bytes = bytes});
    source[segment] = from + bytes;
    cursor[segment] = to + bytes;
  }
  slide = true;
  if (count > 2 && rng() % 3 == 0) {
    compactor::Move& broken = moves[1 + rng() % (count - 1)];
    if (broken.bytes == 0) broken.bytes = 256;
    if (rng() % 2 == 0) {
      broken.to_offset = broken.from_offset + 256;  // up
    } else {
      broken.from_offset = broken.from_offset >= 256 ? broken.from_offset - 256 : 0;  // may overlap the move before
      broken.to_offset = std::min(broken.to_offset, broken.from_offset);
    }
    slide = false;  // a guess: make_slide_moves decides, and both must agree
  }
  return moves;
}

/// Calls each part in reverse order on this thread: any order must give the same result.
void serially_backwards(unsigned parts, const std::function<void(unsigned)>& task) {
  for (unsigned part = parts; part-- > 0;) task(part);
}

}  // namespace

TEST_CASE("a piece's count is what a walk of every block finds in it", "[parallel][heap][slide]") {
  const std::uint64_t seed = std::random_device{}();
  std::cout << "piece counts: seed " << seed << "\n";
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 20; ++round) {
    const Heap heap = churned_heap(rng, static_cast<std::uint32_t>(rng() % 4000));
    std::vector<BlockId> starts;
    heap.walk_starts(1 + rng() % 12, starts);
    const std::uint32_t chunk_bytes = round % 3 == 0 ? 0 : 256u << (rng() % 6);
    INFO("round " << round << ", " << starts.size() << " pieces, chunks of " << chunk_bytes << " bytes");
    // What each piece holds, from a walk of every block in address order.
    std::vector<pool_detail::PieceCount> expected(starts.size());
    std::vector<std::uint32_t> expected_tags;
    std::size_t piece = 0;
    heap.for_each_block([&](const HeapBlock& block) {
      if (piece + 1 < starts.size() && block.id == starts[piece + 1]) ++piece;
      pool_detail::PieceCount& count = expected[piece];
      if (block.free) {
        if (count.live_before_free == SIZE_MAX) count.live_before_free = count.live;
        return;
      }
      ++count.live;
      count.bytes += block.bytes;
      expected_tags.push_back(block.tag);
      if (chunk_bytes == 0) return;
      const std::uint64_t chunks = compactor::detail::chunk_count(block.bytes, chunk_bytes);
      count.chunks += chunks;
      if (count.live_before_free != SIZE_MAX) count.chunks_after_free += chunks;
    });
    std::vector<std::uint32_t> tags;
    for (std::size_t index = 0; index < starts.size(); ++index) {
      INFO("piece " << index << " of " << starts.size());
      const pool_detail::PieceCount got =
          pool_detail::count_piece(heap, starts[index], index + 1 < starts.size() ? starts[index + 1] : no_block,
                                   chunk_bytes, [&](std::uint32_t tag) { tags.push_back(tag); });
      CHECK(got.live == expected[index].live);
      CHECK(got.live_before_free == expected[index].live_before_free);
      CHECK(got.bytes == expected[index].bytes);
      CHECK(got.chunks == expected[index].chunks);
      CHECK(got.chunks_after_free == expected[index].chunks_after_free);
    }
    std::sort(tags.begin(), tags.end());
    std::sort(expected_tags.begin(), expected_tags.end());
    CHECK(tags == expected_tags);  // each live block once
  }
}

TEST_CASE("slide moves staged in parts are exactly those staged in one pass", "[parallel][slide]") {
  const std::uint64_t seed = std::random_device{}();
  std::cout << "slide moves in parts: seed " << seed << "\n";
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  const std::vector<std::uint64_t> bases = {1_MiB, 512_MiB};
  std::size_t refused = 0;
  for (int round = 0; round < 300; ++round) {
    bool slide = true;
    const std::size_t count = round % 10 == 0 ? rng() % 4 : 1 + rng() % 3000;
    const auto moves = random_moves(rng, count, slide);
    const unsigned parts = 1 + static_cast<unsigned>(rng() % compactor::detail::max_slide_parts);
    const std::uint32_t chunk_bytes = std::array<std::uint32_t, 3>{4096, 16384, 65536}[rng() % 3];
    INFO("round " << round << ": " << count << " moves in " << parts << " parts");
    std::vector<compactor::detail::SlideMove> one(count + 1), split(count + 1);
    std::memset(one.data(), 0, one.size() * sizeof(one[0]));
    std::memset(split.data(), 0, split.size() * sizeof(split[0]));
    std::size_t one_count = 0, split_count = 7;
    std::uint64_t one_total = 0, one_bytes = 0, split_total = 9, split_bytes = 9;
    const bool one_slide =
        compactor::detail::make_slide_moves(moves, bases, chunk_bytes, one.data(), one_count, one_total, one_bytes);
    const bool split_slide = compactor::detail::make_slide_moves_in_parts(
        moves, bases, chunk_bytes, split.data(), split_count, split_total, split_bytes, parts, serially_backwards);
    REQUIRE(split_slide == one_slide);
    if (slide) REQUIRE(one_slide);
    if (!one_slide) {
      ++refused;
      continue;
    }
    REQUIRE(std::tie(split_count, split_total, split_bytes) == std::tie(one_count, one_total, one_bytes));
    for (std::size_t index = 0; index < one_count; ++index) {
      INFO("staged move " << index);
      REQUIRE(std::tie(split[index].source, split[index].destination, split[index].bytes, split[index].first_chunk,
                       split[index].move) == std::tie(one[index].source, one[index].destination, one[index].bytes,
                                                      one[index].first_chunk, one[index].move));
    }
  }
  CHECK(refused > 20);  // the broken moves are caught, by a part or at a part's edge
  std::size_t count = 0;
  std::uint64_t total = 0, bytes = 0;
  CHECK_THROWS_AS(compactor::detail::make_slide_moves_in_parts({}, {}, 4096, nullptr, count, total, bytes, 65,
                                                               serially_backwards),
                  std::invalid_argument);
}

namespace {

using Map = vramkit_test::BlockMap;
using vramkit_test::map_of;

struct Outcome {
  Map map;
  std::vector<std::tuple<std::uint64_t, std::uint64_t, std::uint64_t>> reports;  // blocks, bytes moved, largest free
  std::vector<unsigned> plan_threads;  // each compaction's
  std::vector<int> written;            // each compaction's written_while_moving
};

/// Every segment's live blocks packed from its start: a full compaction's end.
bool packed(const Pool& pool) {
  std::uint32_t segment = UINT32_MAX;
  bool free_seen = false;
  for (const BlockInfo& block : pool.block_map()) {
    if (block.segment != segment) segment = block.segment, free_seen = false;
    if (block.state == BlockState::free) free_seen = true;
    else if (free_seen) return false;
  }
  return true;
}

/// Three segments of 256 and 512-byte blocks, about 21,000 kept in each (above
/// PoolOptions::parallel_update_min_blocks), freed in runs (the first blocks of each segment
/// stay packed); compacted with a byte budget, then fully, then again after more frees, then once
/// more with nothing left to move; every byte checked after each. Nothing is pinned: with threads
/// > 1 the compaction with a budget shares the walk and plan first (plan_slide), and so do the
/// others with parts `never`; with parts `automatic` or `always` the team writes their plans
/// while the device runs them (write_slide). One thread: compactor::FullPlanner in parts (always,
/// the reference) or the walk and plan first (automatic, never).
Outcome compact_unpinned(unsigned threads, CompactionParts parts, std::uint64_t seed) {
  Pool pool({.capacity_bytes = 16_MiB, .max_capacity_bytes = 48_MiB, .compaction_parts = parts,
             .compaction_threads = threads},
            make_host_device({.shuffle_seed = seed | 1}));
  std::mt19937_64 rng(seed);
  std::vector<Handle> handles;
  std::vector<std::uint64_t> keys;
  while (pool.statistics().segments < 3 || handles.size() < 70000) {
    handles.push_back(pool.allocate(256 * (1 + rng() % 2)));
    keys.push_back(handles.size());
  }
  for (std::size_t index = 0; index < handles.size(); ++index) vramkit_test::write_pattern(pool, handles[index], keys[index]);
  const auto free_some = [&](int percent) {
    for (std::size_t index = 0; index < handles.size();) {
      const std::size_t run = 1 + rng() % 40;
      const bool free_run = index > 3000 && static_cast<int>(rng() % 100) < percent;
      for (std::size_t end = std::min(handles.size(), index + run); index < end; ++index) {
        if (free_run && handles[index] != Handle{}) {
          pool.free(handles[index]);
          handles[index] = Handle{};
        }
      }
    }
  };
  Outcome outcome;
  const auto compact = [&](const CompactOptions& options) {
    const CompactionReport report = pool.compact(options);
    outcome.reports.emplace_back(report.blocks_moved, report.bytes_moved, report.largest_free_after);
    outcome.plan_threads.push_back(report.plan_threads);
    outcome.written.push_back(report.written_while_moving ? 1 : 0);
    pool.check_invariants();
    for (std::size_t index = 0; index < handles.size(); ++index)
      if (handles[index] != Handle{}) REQUIRE(vramkit_test::holds_pattern(pool, handles[index], keys[index]));
  };
  free_some(50);
  compact({.max_bytes_moved = 1_MiB + rng() % (4_MiB), .release_empty_segments = false});
  compact({.release_empty_segments = false});
  CHECK(packed(pool));
  free_some(30);
  compact({});
  CHECK(packed(pool));
  compact({});
  CHECK(std::get<0>(outcome.reports.back()) == 0);
  outcome.map = map_of(pool);
  return outcome;
}

}  // namespace

TEST_CASE("a walk and plan that threads share move what plan_full moves and keep every byte",
          "[parallel][compaction][threads]") {
  const std::uint64_t seed = std::random_device{}();
  std::cout << "shared walk and plan: seed " << seed << "\n";
  INFO("seed " << seed);
  const Outcome reference = compact_unpinned(1, CompactionParts::always, seed);
  const Outcome alone = compact_unpinned(1, CompactionParts::automatic, seed);
  const Outcome shared = compact_unpinned(4, CompactionParts::never, seed);
  CHECK(reference.plan_threads == std::vector<unsigned>{1, 1, 1, 1});
  CHECK(alone.plan_threads == std::vector<unsigned>{1, 1, 1, 1});
  // The threads share a segment's walk only from PoolOptions::parallel_update_min_blocks live blocks
  // on, which the frees before the third compaction may leave no segment with.
  const auto shared_or_alone = [](unsigned threads) {
    return [threads](unsigned plan_threads) { return plan_threads == threads || plan_threads == 1; };
  };
  CHECK(std::vector<unsigned>(shared.plan_threads.begin(), shared.plan_threads.begin() + 2) ==
        std::vector<unsigned>{4, 4});
  CHECK(std::all_of(shared.plan_threads.begin(), shared.plan_threads.end(), shared_or_alone(4)));
  CHECK(alone.reports == reference.reports);
  CHECK(shared.reports == reference.reports);
  CHECK(std::get<0>(reference.reports[0]) < std::get<0>(reference.reports[1]));  // the budget stopped the first
  CHECK(alone.map == reference.map);
  CHECK(shared.map == reference.map);
  // The team writes the plans without a budget (written_while_moving), the calling thread walking
  // too between the parts it gives the device.
  for (const auto& [threads, parts] : {std::pair{2u, CompactionParts::automatic}, std::pair{4u, CompactionParts::always},
                                       std::pair{8u, CompactionParts::automatic}}) {
    INFO(threads << " threads");
    const Outcome written = compact_unpinned(threads, parts, seed);
    // With a budget, `always` keeps compactor::FullPlanner (one thread) and `automatic` plan_slide.
    const unsigned budgeted = parts == CompactionParts::always ? 1 : threads;
    CHECK(std::vector<unsigned>(written.plan_threads.begin(), written.plan_threads.begin() + 2) ==
          std::vector<unsigned>{budgeted, threads});
    CHECK(std::all_of(written.plan_threads.begin() + 1, written.plan_threads.end(), shared_or_alone(threads)));
    CHECK(written.written[0] == 0);  // the budget
    CHECK(written.written[1] == 1);
    CHECK(written.reports == reference.reports);
    CHECK(written.map == reference.map);
  }
}

TEST_CASE("a shared walk's compaction that a device fault stops part way keeps every byte", "[parallel][compaction][faults][threads]") {
  // 25,000 kept blocks planned first (they are small), the walk and plan shared by four threads or
  // done by one; the host device fails the k-th move. The update made ahead from the places that
  // the shared plan wrote is undone and the completed moves applied: the layout must be the one
  // a single thread leaves, and a compaction without faults afterwards must finish the job.
  const std::uint64_t seed = std::random_device{}();
  std::cout << "shared walk after a fault: seed " << seed << "\n";
  INFO("seed " << seed);
  for (const std::uint64_t move_at : {std::uint64_t{1}, std::uint64_t{7000}, std::uint64_t{24000}}) {
    INFO("move_at " << move_at);
    std::vector<Map> maps;
    for (unsigned threads : {1u, 4u}) {
      auto device = std::make_shared<HostDevice>(HostDeviceOptions{.faults = {.move_at = move_at}, .shuffle_seed = seed | 1});
      Pool pool({.capacity_bytes = 32_MiB,
                 .compaction_parts = CompactionParts::never,
                 .free_cache_bytes = 0,
                 .compaction_threads = threads},
                device);
      const std::vector<Handle> kept = vramkit_test::keep_every_other(pool, 50000, seed);
      CHECK_THROWS_WITH(pool.compact(), Catch::Contains("injected"));
      pool.check_invariants();
      for (std::size_t i = 0; i < kept.size(); ++i) REQUIRE(vramkit_test::holds_pattern(pool, kept[i], 2 * i + 1));
      maps.push_back(map_of(pool));
      device->set_faults({});
      const CompactionReport report = pool.compact();
      CHECK(report.plan_threads == threads);
      pool.check_invariants();
      for (std::size_t i = 0; i < kept.size(); ++i) REQUIRE(vramkit_test::holds_pattern(pool, kept[i], 2 * i + 1));
      CHECK(pool.statistics().fragmentation() == 0.0);
    }
    CHECK(maps[0] == maps[1]);
  }
}
