// Chunking moves for the one-pass executor: memmove semantics in every order the waits allow.
#include <catch2/catch.hpp>

#include <algorithm>
#include <array>
#include <functional>
#include <iostream>
#include <numeric>
#include <random>

#include "support/first_difference.hpp"
#include "support/move_executor.hpp"
#include "vramkit/compactor/chunk_plan.hpp"
#include "vramkit/errors.hpp"
#include "vramkit/units.hpp"

using namespace vramkit;
using namespace vramkit::compactor;
using vramkit::test::batch_memmove_reference;
using vramkit::test::execute_randomly;
using vramkit::test::test_seed;

namespace {

std::vector<std::uint8_t> random_bytes(std::size_t size, std::mt19937_64& rng) {
  std::vector<std::uint8_t> bytes(size);
  for (auto& byte : bytes) byte = static_cast<std::uint8_t>(rng());
  return bytes;
}

/// Plans, validates, and executes the plan in `orders` random orders; each must give the batch
/// memmove result.
ChunkPlan check_memmove_semantics(const std::vector<CopyRange>& moves, std::size_t memory_bytes,
                                  std::uint32_t chunk_bytes, std::uint64_t seed, int orders = 4) {
  INFO("seed " << seed << ", chunk_bytes " << chunk_bytes);
  std::mt19937_64 rng(seed);
  const ChunkPlan plan = make_chunk_plan(moves, chunk_bytes);
  REQUIRE_NOTHROW(plan.validate());
  const auto before = random_bytes(memory_bytes, rng);
  const auto expected = batch_memmove_reference(before, moves);
  for (int order = 0; order < orders; ++order) {
    auto memory = before;
    execute_randomly(plan, memory, rng);
    INFO("order " << order);
    REQUIRE(vramkit_test::first_difference(memory, expected) == vramkit_test::no_difference);
  }
  return plan;
}

/// Chunks as the spec defines them (equal pieces from each move's start), for brute-force checks.
struct PlainChunk {
  std::uint64_t source, destination, bytes;
};
std::vector<PlainChunk> split(const std::vector<CopyRange>& moves, std::uint32_t chunk_bytes) {
  std::vector<PlainChunk> chunks;
  for (const auto& move : moves)
    if (move.bytes != 0 && move.source != move.destination)
      for (std::uint64_t done = 0; done < move.bytes; done += chunk_bytes)
        chunks.push_back({move.source + done, move.destination + done,
                          std::min<std::uint64_t>(chunk_bytes, move.bytes - done)});
  return chunks;
}

bool overlaps(std::uint64_t a, std::uint64_t a_bytes, std::uint64_t b, std::uint64_t b_bytes) {
  return a < b + b_bytes && b < a + a_bytes;
}

/// Whether the "x writes over y's source" graph between chunks has a cycle, by DFS. O(c^2).
bool has_dependency_cycle(const std::vector<PlainChunk>& chunks) {
  const std::size_t count = chunks.size();
  std::vector<int> state(count, 0);  // 0 new, 1 on the stack, 2 done
  std::function<bool(std::size_t)> visit = [&](std::size_t x) {
    state[x] = 1;
    for (std::size_t y = 0; y < count; ++y) {
      if (y == x || !overlaps(chunks[x].destination, chunks[x].bytes, chunks[y].source, chunks[y].bytes))
        continue;
      if (state[y] == 1 || (state[y] == 0 && visit(y))) return true;
    }
    state[x] = 2;
    return false;
  };
  for (std::size_t x = 0; x < count; ++x)
    if (state[x] == 0 && visit(x)) return true;
  return false;
}

/// Brute force: each chunk waits for exactly the same-phase chunks whose source overlaps its
/// destination, all with lower indices; no chunk of a later phase reads what it writes.
void check_waits_by_brute_force(const ChunkPlan& plan) {
  std::vector<std::size_t> phase_of(plan.chunks.size());
  for (std::size_t p = 0; p < plan.phases(); ++p)
    for (std::size_t i = plan.phase_begin[p]; i < plan.phase_begin[p + 1]; ++i) phase_of[i] = p;
  for (std::size_t x = 0; x < plan.chunks.size(); ++x) {
    const Chunk& chunk = plan.chunks[x];
    std::vector<std::uint32_t> expected;
    for (std::size_t y = 0; y < plan.chunks.size(); ++y) {
      if (y == x || !overlaps(chunk.destination, chunk.bytes, plan.chunks[y].source, plan.chunks[y].bytes))
        continue;
      INFO("chunk " << x << " overwrites the source of chunk " << y);
      REQUIRE(phase_of[y] <= phase_of[x]);
      if (phase_of[y] == phase_of[x]) expected.push_back(static_cast<std::uint32_t>(y));
    }
    INFO("chunk " << x);
    if (expected.empty()) {
      REQUIRE(chunk.wait_first == no_wait);
      REQUIRE(chunk.wait_last == no_wait);
      continue;
    }
    REQUIRE(expected.back() < x);
    REQUIRE(chunk.wait_first == expected.front());
    REQUIRE(chunk.wait_last == expected.back());
    REQUIRE(expected.size() == expected.back() - expected.front() + 1);
  }
}

std::size_t phase_of_chunk(const ChunkPlan& plan, std::size_t chunk) {
  return static_cast<std::size_t>(std::upper_bound(plan.phase_begin.begin(), plan.phase_begin.end(), chunk) -
                                  plan.phase_begin.begin() - 1);
}

}  // namespace

TEST_CASE("make_chunk_plan splits each move into chunks of at most chunk_bytes in source order",
          "[chunk_plan]") {
  const std::vector<CopyRange> moves = {{100'000, 0, 1000}, {50'000, 60'000, 256}, {10'000, 200'000, 4097}};
  const ChunkPlan plan = make_chunk_plan(moves, 1024);
  REQUIRE_NOTHROW(plan.validate());
  REQUIRE(plan.total_bytes == 1000 + 256 + 4097);
  REQUIRE(plan.phases() == 1);
  REQUIRE(plan.chunks.size() == 1 + 1 + 5);
  // Source order: move 2 (five chunks, the last 1 byte), move 1, move 0.
  REQUIRE(plan.chunks[0].move == 2);
  REQUIRE(plan.chunks[0].source == 10'000);
  REQUIRE(plan.chunks[0].destination == 200'000);
  REQUIRE(plan.chunks[4].bytes == 1);
  REQUIRE(plan.chunks[4].source == 10'000 + 4096);
  REQUIRE(plan.chunks[5].move == 1);
  REQUIRE(plan.chunks[6].move == 0);
  REQUIRE(plan.chunks[6].bytes == 1000);
  for (const Chunk& chunk : plan.chunks) REQUIRE(chunk.wait_first == no_wait);
}

TEST_CASE("zero-byte and in-place moves produce no chunks", "[chunk_plan]") {
  const std::vector<CopyRange> moves = {{4096, 0, 0}, {8192, 8192, 1024}, {2048, 0, 512}};
  const ChunkPlan plan = make_chunk_plan(moves, 256);
  REQUIRE_NOTHROW(plan.validate());
  REQUIRE(plan.chunks.size() == 2);
  REQUIRE(plan.total_bytes == 512);
  for (const Chunk& chunk : plan.chunks) REQUIRE(chunk.move == 2);
  const ChunkPlan empty = make_chunk_plan(std::vector<CopyRange>{{64, 64, 64}}, 256);
  REQUIRE(empty.chunks.empty());
  REQUIRE(empty.phases() == 0);
  REQUIRE_NOTHROW(empty.validate());
}

TEST_CASE("self-overlapping slides keep memmove semantics in every order the waits allow", "[chunk_plan]") {
  // Scaled down so that the bytes fit a small array: chunk 1 KiB, blocks 256 B .. 16.25 KiB; the
  // overlap cases are relative to the chunk and block sizes, as with 64 KiB chunks.
  constexpr std::uint32_t chunk = 1024;
  const std::uint64_t block = GENERATE(256, 1024, 4096, 16 * 1024 + 256);
  const std::uint64_t displacement =
      GENERATE_COPY(256, 768, std::uint64_t{chunk}, block > 256 ? block - 256 : 256, block + chunk);
  const bool up = GENERATE(false, true);
  const std::size_t blocks = 4;
  // Blocks sit back to back (as before a compaction), so each block's destination also overlaps
  // its neighbour's source: a chain of dependencies across moves as well as within each.
  const std::uint64_t base = 4096 + blocks * block + displacement;
  std::vector<CopyRange> moves;
  for (std::size_t k = 0; k < blocks; ++k) {
    const std::uint64_t source = base + k * block;
    moves.push_back({source, up ? source + displacement : source - displacement, block});
  }
  const std::size_t memory_bytes = base * 2 + blocks * block + displacement;
  INFO("block " << block << ", displacement " << displacement << (up ? " up" : " down"));
  const ChunkPlan plan =
      check_memmove_semantics(moves, memory_bytes, chunk, test_seed(0x5eed0001 + block + displacement));
  check_waits_by_brute_force(plan);
  if (!up) REQUIRE(plan.phases() == 1);  // downward moves only ever wait for earlier tickets
  // Moving up by less than the whole run overwrites sources with later tickets: later phases.
  if (up && displacement < blocks * block) REQUIRE(plan.phases() > 1);
  if (up && displacement >= blocks * block) REQUIRE(plan.phases() == 1);
}

TEST_CASE("a move going up runs in a later phase than the moves whose sources it overwrites",
          "[chunk_plan]") {
  // C moves out of the way, B moves up into C's old place, A moves up into B's: three phases.
  const std::vector<CopyRange> moves = {{0, 512, 1024}, {1024, 1536, 1024}, {2048, 8192, 1024}};
  const ChunkPlan plan = check_memmove_semantics(moves, 16 * 1024, 1024, test_seed(0x5eed0002));
  REQUIRE(plan.phases() == 3);
  for (std::size_t i = 0; i < plan.chunks.size(); ++i)
    REQUIRE(phase_of_chunk(plan, i) == 2 - plan.chunks[i].move);
  check_waits_by_brute_force(plan);
}

TEST_CASE("after the first k phases, the moves with every chunk in them are complete", "[chunk_plan]") {
  // As above: C (move 2) runs in phase 0, B (move 1) in phase 1, A (move 0) in phase 2.
  const std::vector<CopyRange> moves = {{0, 512, 1024}, {1024, 1536, 1024}, {2048, 8192, 1024}};
  const ChunkPlan plan = make_chunk_plan(moves, 1024);
  REQUIRE(plan.phases() == 3);
  using Completed = std::vector<std::uint8_t>;
  CHECK(moves_completed_by_phases(plan, 0, 3) == Completed{0, 0, 0});
  CHECK(moves_completed_by_phases(plan, 1, 3) == Completed{0, 0, 1});
  CHECK(moves_completed_by_phases(plan, 2, 3) == Completed{0, 1, 1});
  CHECK(moves_completed_by_phases(plan, 3, 3) == Completed{1, 1, 1});
  CHECK(moves_completed_by_phases(plan, 1, 4) == Completed{0, 0, 1, 0});  // a move without chunks never ran
  // One move over many phases: complete only once its last phase has run.
  const std::vector<CopyRange> up = {{0, 4096, 16384}};
  const ChunkPlan split = make_chunk_plan(up, 1024);
  REQUIRE(split.phases() > 1);
  CHECK(moves_completed_by_phases(split, split.phases() - 1, 1) == Completed{0});
  CHECK(moves_completed_by_phases(split, split.phases(), 1) == Completed{1});
}

TEST_CASE("check_move_indices names a chunk whose move is not among the plan's moves", "[chunk_plan]") {
  const std::vector<CopyRange> moves = {{0, 512, 1024}, {1024, 1536, 1024}, {2048, 8192, 1024}};
  const ChunkPlan plan = make_chunk_plan(moves, 1024);
  CHECK_NOTHROW(check_move_indices(plan, 3));
  CHECK_THROWS_AS(check_move_indices(plan, 2), vramkit::invalid_argument);
  CHECK_THROWS_WITH(check_move_indices(plan, 2), Catch::Contains("move 2") && Catch::Contains("one of 2 moves"));
}

TEST_CASE("a 64 MiB block moving up by 1 MiB needs one phase per 1 MiB of it", "[chunk_plan]") {
  // Address model only: chunk i writes over the source of chunk i + 16, a later ticket.
  const std::vector<CopyRange> moves = {{0, 1_MiB, 64_MiB}};
  const ChunkPlan plan = make_chunk_plan(moves, 64 * 1024);
  REQUIRE_NOTHROW(plan.validate());
  REQUIRE(plan.chunks.size() == 1024);
  REQUIRE(plan.phases() == 64);
  for (const Chunk& chunk : plan.chunks) REQUIRE(chunk.wait_first == no_wait);
}

TEST_CASE("16 blocks of 64 MiB sliding down by 1..16 MiB form one phase with one wait per chunk",
          "[chunk_plan]") {
  std::vector<CopyRange> moves;
  for (std::uint64_t k = 0; k < 16; ++k) {
    const std::uint64_t source = k * 80_MiB + 16_MiB;
    moves.push_back({source, source - (k + 1) * 1_MiB, 64_MiB});
  }
  const ChunkPlan plan = make_chunk_plan(moves, 64 * 1024);
  REQUIRE_NOTHROW(plan.validate());
  REQUIRE(plan.phases() == 1);
  REQUIRE(plan.chunks.size() == 16 * 1024);
  for (std::size_t i = 0; i < plan.chunks.size(); ++i) {
    const Chunk& chunk = plan.chunks[i];
    const std::size_t within = i % 1024;              // chunk index inside its block
    const std::size_t shift = (chunk.move + 1) * 16;  // displacement in chunks
    INFO("chunk " << i);
    if (within < shift) {
      REQUIRE(chunk.wait_first == no_wait);  // writes below its block's old range
    } else {
      REQUIRE(chunk.wait_first == i - shift);
      REQUIRE(chunk.wait_last == i - shift);
    }
  }
}

TEST_CASE("a 24 MiB slide by 1 MiB and 3 MiB + 256 B is byte-exact with 64 KiB chunks", "[chunk_plan]") {
  const std::vector<CopyRange> moves = {{1_MiB, 0, 12_MiB}, {16_MiB + 3_MiB + 256, 13_MiB, 12_MiB}};
  check_memmove_semantics(moves, 32_MiB, 64 * 1024, test_seed(0x5eed0003), 1);
}

TEST_CASE("make_chunk_plan throws on overlapping destinations or sources", "[chunk_plan]") {
  const std::vector<CopyRange> destinations = {{0, 8192, 1024}, {2048, 8192 + 512, 1024}};
  REQUIRE_THROWS_WITH(make_chunk_plan(destinations, 256), Catch::Contains("overlapping destination"));
  const std::vector<CopyRange> sources = {{0, 8192, 1024}, {512, 16384, 1024}};
  REQUIRE_THROWS_WITH(make_chunk_plan(sources, 256), Catch::Contains("overlapping source"));
  const std::vector<CopyRange> touching = {{0, 8192, 1024}, {1024, 8192 + 1024, 1024}};
  REQUIRE_NOTHROW(make_chunk_plan(touching, 256));
}

TEST_CASE("make_chunk_plan throws on cycles: a swap, a partial swap and a rotation", "[chunk_plan]") {
  const std::vector<CopyRange> swap = {{0, 1024, 1024}, {1024, 0, 1024}};
  REQUIRE_THROWS_WITH(make_chunk_plan(swap, 256), Catch::Contains("cycle"));
  const std::vector<CopyRange> partial = {{0, 512, 1024}, {1024, 0, 512}};
  REQUIRE_THROWS_WITH(make_chunk_plan(partial, 4096), Catch::Contains("cycle"));
  const std::vector<CopyRange> rotation = {{0, 4096, 1024}, {4096, 8192, 1024}, {8192, 0, 1024}};
  REQUIRE_THROWS_AS(make_chunk_plan(rotation, 1024), std::logic_error);
  // The same rotation with one block parked elsewhere is a chain, not a cycle.
  const std::vector<CopyRange> chain = {{0, 4096, 1024}, {4096, 8192, 1024}, {8192, 65536, 1024}};
  REQUIRE(make_chunk_plan(chain, 1024).phases() == 3);
}

TEST_CASE("random move sets execute with memmove semantics unless they hold a real cycle", "[chunk_plan]") {
  const std::uint64_t seed = test_seed(0x5eed0004);
  INFO("seed " << seed);
  std::cout << "chunk_plan random move sets: seed " << seed << "\n";
  std::mt19937_64 rng(seed);
  constexpr std::uint64_t memory_bytes = 64 * 1024;
  int planned = 0;
  int cycles = 0;
  for (int round = 0; round < 300; ++round) {
    INFO("round " << round);
    // Disjoint sources and disjoint destinations, each a random sequence of blocks and gaps.
    const std::size_t count = 1 + rng() % 12;
    std::vector<std::uint64_t> sizes(count);
    for (auto& size : sizes) size = 64 * (1 + rng() % 48);
    auto place = [&](std::vector<std::uint64_t> order_sizes, std::vector<std::size_t> order) {
      std::vector<std::uint64_t> offsets(count);
      std::uint64_t cursor = 64 * (rng() % 16);
      for (std::size_t k : order) {
        offsets[k] = cursor;
        cursor += order_sizes[k] + 64 * (rng() % 24);
      }
      return offsets;
    };
    std::vector<std::size_t> order(count);
    std::iota(order.begin(), order.end(), 0);
    const auto sources = place(sizes, order);
    // Half the rounds keep the order (monotone maps, like slides); the others shuffle it.
    if (round % 2 == 1) std::shuffle(order.begin(), order.end(), rng);
    const auto destinations = place(sizes, order);
    std::vector<CopyRange> moves;
    for (std::size_t k = 0; k < count; ++k) moves.push_back({sources[k], destinations[k], sizes[k]});
    const std::uint32_t chunk_bytes = std::array<std::uint32_t, 4>{64, 256, 960, 4096}[rng() % 4];
    const bool cycle = has_dependency_cycle(split(moves, chunk_bytes));
    if (cycle) {
      ++cycles;
      REQUIRE_THROWS_WITH(make_chunk_plan(moves, chunk_bytes), Catch::Contains("cycle"));
      continue;
    }
    const ChunkPlan plan = check_memmove_semantics(moves, memory_bytes, chunk_bytes, rng(), 2);
    check_waits_by_brute_force(plan);
    ++planned;
  }
  INFO("planned " << planned << ", cycles " << cycles);
  REQUIRE(planned > 100);
  REQUIRE(cycles > 10);
}

TEST_CASE("validate rejects plans that break an invariant", "[chunk_plan]") {
  // A down slide by half a chunk (each chunk waits for its predecessor), an up move by half a chunk
  // and a move out of its way (three phases).
  const std::vector<CopyRange> moves = {{4096, 3584, 4096}, {16384, 16896, 2048}, {18432, 32768, 1024}};
  const ChunkPlan valid = make_chunk_plan(moves, 1024);
  REQUIRE_NOTHROW(valid.validate());
  REQUIRE(valid.phases() == 3);  // the up move overwrites the third move's source too
  const std::size_t waiting =
      static_cast<std::size_t>(std::find_if(valid.chunks.begin(), valid.chunks.end(),
                                            [](const Chunk& chunk) { return chunk.wait_first != no_wait; }) -
                               valid.chunks.begin());
  REQUIRE(waiting < valid.chunks.size());

  ChunkPlan broken = valid;
  SECTION("total_bytes off by one") {
    broken.total_bytes += 1;
  }
  SECTION("a dependency left out") {
    broken.chunks[waiting].wait_first = broken.chunks[waiting].wait_last = no_wait;
  }
  SECTION("a wait on the chunk itself") {
    broken.chunks[waiting].wait_last = static_cast<std::uint32_t>(waiting);
  }
  SECTION("chunks out of source order") {
    std::swap(broken.chunks[0], broken.chunks[1]);
  }
  SECTION("a chunk longer than chunk_bytes") {
    broken.chunk_bytes = 512;
  }
  SECTION("overlapping destinations") {
    broken.chunks[1].destination = broken.chunks[0].destination + 512;
  }
  SECTION("phases merged, so a chunk waits on a later ticket") {
    broken.phase_begin = {0, static_cast<std::uint32_t>(broken.chunks.size())};
  }
  SECTION("phase_begin missing its end") {
    broken.phase_begin.pop_back();
  }
  REQUIRE_THROWS_AS(broken.validate(), std::logic_error);
}
