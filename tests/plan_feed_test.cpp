// detail::PlanFeed: a PlanMore run on a thread of its own, read while it plans (the CUDA device's
// compaction in parts). Host code; runs in CI.
#include <catch2/catch.hpp>

#include <iostream>
#include <random>
#include <stdexcept>
#include <thread>

#include "device/plan_feed.hpp"
#include "support/move_executor.hpp"

using namespace vramkit;
using vramkit::test::test_seed;

namespace {

compactor::Move numbered(std::size_t index) {
  return {.tag = static_cast<std::uint32_t>(index), .from_offset = 2 * index, .to_offset = index, .bytes = 1};
}

}  // namespace

TEST_CASE("the plan feed hands over every move and every part end, in order, while it plans",
          "[device][plan_feed]") {
  const std::uint64_t seed = test_seed(0xfeed);
  std::cout << "plan feed: seed " << seed << "\n";
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (int round = 0; round < 50; ++round) {
    // The planner: random batches, some of them ending a part, until `total` moves.
    const std::size_t total = rng() % 3000;
    std::vector<std::size_t> expected_ends;
    std::vector<std::size_t> batches;
    std::vector<bool> ends_part;
    for (std::size_t planned = 0; planned < total;) {
      const std::size_t batch = std::min<std::size_t>(rng() % 300, total - planned);
      planned += batch;
      batches.push_back(batch);
      ends_part.push_back(planned < total && rng() % 3 == 0);
      if (ends_part.back()) expected_ends.push_back(planned);
    }
    std::vector<compactor::Move> moves;
    moves.reserve(total);
    std::size_t call = 0;
    std::mt19937_64 pace(rng());
    const Device::PlanMore plan_more = [&](std::vector<compactor::Move>& out) {
      if (pace() % 4 == 0) std::this_thread::sleep_for(std::chrono::microseconds(pace() % 50));
      if (call == batches.size()) return Device::Planned::all;
      for (std::size_t i = 0; i < batches[call]; ++i) out.push_back(numbered(out.size()));
      const bool part = ends_part[call];
      ++call;
      return call == batches.size() ? Device::Planned::all : part ? Device::Planned::part : Device::Planned::batch;
    };
    const compactor::Move* storage = moves.data();
    detail::PlanFeed feed(moves, plan_more);
    detail::PlanFeed::Progress seen;
    std::size_t read = 0;
    std::vector<std::size_t> ends;
    for (;;) {
      for (std::size_t i = read; i < seen.moves; ++i) REQUIRE(storage[i].tag == i);  // published moves are final
      read = seen.moves;
      while (ends.size() < seen.parts) {
        ends.push_back(feed.part_end(ends.size()));
        REQUIRE(ends.back() <= seen.moves);
      }
      if (seen.done) break;
      const detail::PlanFeed::Progress next = feed.wait_beyond(seen);
      REQUIRE(next.version > seen.version);
      REQUIRE(next.moves >= seen.moves);
      seen = next;
    }
    feed.finish();
    CHECK(read == total);
    CHECK(moves.size() == total);
    CHECK(ends == expected_ends);
  }
}

TEST_CASE("the plan feed rethrows what the planner throws, after the moves published before",
          "[device][plan_feed]") {
  std::vector<compactor::Move> moves;
  moves.reserve(100);
  int calls = 0;
  const Device::PlanMore plan_more = [&](std::vector<compactor::Move>& out) {
    if (++calls == 3) throw std::runtime_error("planner failed");
    out.push_back(numbered(out.size()));
    return Device::Planned::part;
  };
  detail::PlanFeed feed(moves, plan_more);
  detail::PlanFeed::Progress seen;
  while (!seen.done) seen = feed.wait_beyond(seen);
  CHECK(seen.moves == 2);
  CHECK_THROWS_WITH(feed.finish(), "planner failed");
}

TEST_CASE("a plan feed that reallocates its moves is refused", "[device][plan_feed]") {
  std::vector<compactor::Move> moves;  // no room reserved: the first append reallocates
  const Device::PlanMore plan_more = [&](std::vector<compactor::Move>& out) {
    out.push_back(numbered(out.size()));
    return Device::Planned::all;
  };
  detail::PlanFeed feed(moves, plan_more);
  detail::PlanFeed::Progress seen;
  while (!seen.done) seen = feed.wait_beyond(seen);
  CHECK_THROWS_AS(feed.finish(), std::logic_error);
}

TEST_CASE("a plan feed destroyed early stops its planner after the current call", "[device][plan_feed]") {
  std::vector<compactor::Move> moves;
  moves.reserve(1000000);
  std::atomic<int> calls{0};
  {
    const Device::PlanMore plan_more = [&](std::vector<compactor::Move>& out) {
      ++calls;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
      out.push_back(numbered(out.size()));
      return out.size() == 1000000 ? Device::Planned::all : Device::Planned::batch;
    };
    detail::PlanFeed feed(moves, plan_more);
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }  // no finish(): as when queueing fails part way
  CHECK(calls.load() < 1000);
}
