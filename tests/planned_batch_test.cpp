// PlannedBatch on the host device: the pool-side fit check, one region per batch, buffers that
// never overlap while their lifetimes do, lifetime checks, and the region going back to the pool.
#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <vector>

#include <vramkit/host_device.hpp>
#include <vramkit/planned_batch.hpp>
#include <vramkit/units.hpp>

using namespace vramkit;
using Catch::Matchers::Contains;

namespace {

// x 4 KiB in a..b, y 2 KiB in b..c, z 8 KiB in c: peak 10 KiB (docs/memory_plans.md's example).
MemoryPlan three_stage_plan() {
  MemoryPlan plan({"a", "b", "c"});
  plan.add_buffer({.name = "x", .bytes = 4_KiB, .first_stage = "a", .last_stage = "b"});
  plan.add_buffer({.name = "y", .bytes = 2_KiB, .first_stage = "b", .last_stage = "c"});
  plan.add_buffer({.name = "z", .bytes = 8_KiB, .first_stage = "c", .last_stage = "c"});
  return plan;
}

std::uint32_t pattern(std::size_t buffer, std::size_t element) {
  return static_cast<std::uint32_t>(buffer * 1'000'003u + element * 7u + 1u);
}

}  // namespace

TEST_CASE("check_fit against a pool counts its largest free block and its growth room", "[batch]") {
  MemoryPlan plan({"load", "big", "store"});
  plan.add_buffer({.name = "input", .bytes = 1_MiB, .first_stage = "load", .last_stage = "load"});
  plan.add_buffer({.name = "huge", .bytes = 5_MiB, .first_stage = "big", .last_stage = "big"});
  const PlanSolution solution = solve(plan);
  REQUIRE(solution.peak_bytes == 5_MiB);

  Pool fixed({.capacity_bytes = 4_MiB}, make_host_device());
  const Handle taken = fixed.allocate(1_MiB);
  CHECK(largest_region_available(fixed) == 3_MiB);
  const FitReport report = check_fit(solution, fixed);
  CHECK_FALSE(report.fits);
  CHECK(report.available_bytes == 3_MiB);
  CHECK(report.needed_bytes == 5_MiB);
  CHECK(report.shortfall_bytes == 2_MiB);
  REQUIRE(report.worst_stage.has_value());
  CHECK(*report.worst_stage == 1);  // "big"
  CHECK(report.stages[0].shortfall_bytes == 0);
  CHECK(report.stages[1].shortfall_bytes == 2_MiB);
  CHECK_THROWS_AS(PlannedBatch(fixed, plan, solution), out_of_memory);
  fixed.free(taken);

  Pool growing({.capacity_bytes = 4_MiB, .max_capacity_bytes = 16_MiB}, make_host_device());
  CHECK(largest_region_available(growing) == 12_MiB);
  CHECK(check_fit(solution, growing).fits);
  PlannedBatch batch(growing, plan, solution);  // the fit check's promise holds
  CHECK(growing.statistics().segments == 2);
}

TEST_CASE("check_fit counts the bytes an aligned region skips, and refuses an alignment no block may have",
          "[batch]") {
  Pool pool({.capacity_bytes = 4_MiB}, make_host_device());
  // Pinned at the start: the free space begins 256 bytes in, and no compaction can change that.
  const Handle pinned = pool.allocate_pinned(256);
  const std::uint64_t free_bytes = 4_MiB - 256;
  const std::uint64_t aligned_room = free_bytes - (4_KiB - 256);  // a 4 KiB-aligned start skips 3840 bytes
  CHECK(largest_region_available(pool) == free_bytes);
  CHECK(largest_region_available(pool, 4_KiB) == aligned_room);
  const auto plan_of = [](std::uint64_t peak) {
    MemoryPlan plan({"only"});
    plan.add_buffer({.name = "a", .bytes = 4_KiB, .first_stage = "only", .last_stage = "only", .alignment = 4_KiB});
    plan.add_buffer({.name = "b", .bytes = peak - 4_KiB, .first_stage = "only", .last_stage = "only"});
    return plan;
  };
  {  // as large as the free bytes: no 4 KiB-aligned region holds it
    const MemoryPlan plan = plan_of(free_bytes);
    const PlanSolution solution = solve(plan);
    REQUIRE(solution.peak_bytes == free_bytes);
    REQUIRE(solution.region_alignment == 4_KiB);
    const FitReport report = check_fit(solution, pool);
    CHECK_FALSE(report.fits);
    CHECK(report.shortfall_bytes == free_bytes - aligned_room);
    CHECK_THROWS_AS(PlannedBatch(pool, plan, solution), out_of_memory);
  }
  {  // exactly what an aligned region can have: the promise holds
    const MemoryPlan plan = plan_of(aligned_room);
    const PlanSolution solution = solve(plan);
    CHECK(check_fit(solution, pool).fits);
    PlannedBatch batch(pool, plan, solution);
    CHECK(batch.address() % 4_KiB == 0);
  }
  {  // an alignment past 2 MiB: no pool block can have it, whatever the room
    MemoryPlan plan({"only"});
    plan.add_buffer({.name = "a", .bytes = 4_KiB, .first_stage = "only", .last_stage = "only", .alignment = 4_MiB});
    const PlanSolution solution = solve(plan);
    CHECK_THROWS_WITH(check_fit(solution, pool), Contains("4194304") && Contains("2097152"));
    CHECK_THROWS_AS(largest_region_available(pool, 3), invalid_argument);
  }
  CHECK(pool.release(pinned));
}

TEST_CASE("a batch takes one aligned region of the peak and gives it back at scope end", "[batch]") {
  Pool pool({.capacity_bytes = 4_MiB}, make_host_device());
  const MemoryPlan plan = three_stage_plan();
  const PlanSolution solution = solve(plan);
  {
    PlannedBatch batch(pool, plan, solution);
    CHECK(batch.region_bytes() == 10_KiB);
    CHECK(batch.address() % solution.region_alignment == 0);
    CHECK(pool.statistics().used_bytes == 10_KiB);
    CHECK(pool.statistics().pinned_allocations == 1);
    CHECK(batch.buffer<float>("x").address() == batch.address() + solution.buffers[0].offset);
    CHECK(batch.buffer<float>(std::size_t{0}).size() == 1024);
  }
  CHECK(pool.statistics().used_bytes == 0);
  CHECK(pool.statistics().pinned_allocations == 0);

  PlannedBatch batch(pool, plan, solution);
  const ArenaBuffer<float> x = batch.buffer<float>("x");
  batch.release();
  CHECK(pool.statistics().used_bytes == 0);
  CHECK_THROWS_AS(x.upload(std::vector<float>(4)), invalid_handle);
  CHECK_THROWS_AS(batch.buffer<float>("x"), state_error);
}

TEST_CASE("buffers live in a common stage never overlap: per-stage patterns survive", "[batch]") {
  // Eight stages, buffers of mixed sizes and lifetimes so that the solver reuses bytes.
  MemoryPlan plan({"s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7"});
  const std::array<std::array<std::uint32_t, 3>, 12> specs{{{4096, 0, 2},
                                                            {1000, 0, 0},
                                                            {3000, 1, 4},
                                                            {512, 1, 1},
                                                            {8192, 2, 3},
                                                            {700, 3, 7},
                                                            {2048, 4, 5},
                                                            {6000, 5, 6},
                                                            {100, 5, 5},
                                                            {4096, 6, 7},
                                                            {1500, 7, 7},
                                                            {256, 0, 7}}};
  for (std::size_t i = 0; i < specs.size(); ++i) {
    plan.add_array<std::uint32_t>("b" + std::to_string(i), specs[i][0], "s" + std::to_string(specs[i][1]),
                                  "s" + std::to_string(specs[i][2]));
  }
  const PlanSolution solution = solve(plan);
  REQUIRE(solution.peak_bytes < plan.total_reserved_bytes());  // bytes really are shared

  Pool pool({.capacity_bytes = 4_MiB}, make_host_device());
  PlannedBatch batch(pool, plan, solution);
  for (std::size_t stage = 0; stage < plan.stages().size(); ++stage) {
    batch.enter_stage(stage);
    // Each buffer gets its pattern in its first stage ...
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (specs[i][1] != stage) continue;
      std::vector<std::uint32_t> values(specs[i][0]);
      for (std::size_t e = 0; e < values.size(); ++e) values[e] = pattern(i, e);
      batch.buffer<std::uint32_t>(i).upload(values);
    }
    // ... and every buffer live now still holds its own: nobody live wrote over it.
    for (std::size_t i = 0; i < specs.size(); ++i) {
      if (!solution.live_in(i, stage)) continue;
      const std::vector<std::uint32_t> values = batch.buffer<std::uint32_t>(i).to_vector();
      std::size_t wrong = 0;
      for (std::size_t e = 0; e < values.size(); ++e) wrong += values[e] != pattern(i, e);
      INFO("buffer b" << i << " in stage s" << stage);
      CHECK(wrong == 0);
    }
  }
}

TEST_CASE("lifetime checks name the buffer, the stage and the declared range", "[batch]") {
  Pool pool({.capacity_bytes = 4_MiB}, make_host_device());
  const MemoryPlan plan = three_stage_plan();
  const PlanSolution solution = solve(plan);
  PlannedBatch batch(pool, plan, solution, {.check_lifetimes = true});
  CHECK(batch.stage_name() == "a");
  CHECK_THROWS_WITH(batch.buffer<float>("z"),
                    Contains("'z'") && Contains("stage 'a' (0)") && Contains("'c'..'c' (2..2)"));
  batch.enter_stage("c");
  CHECK_THROWS_AS(batch.buffer<float>("x"), state_error);
  CHECK(batch.buffer<float>("z").size() == 2048);
  CHECK_THROWS_AS(batch.enter_stage("d"), invalid_argument);
  CHECK_THROWS_AS(batch.enter_stage(std::size_t{3}), invalid_argument);
  CHECK_THROWS_AS(batch.buffer<float>("nope"), invalid_argument);
  using Triple = std::array<char, 3>;
  CHECK_THROWS_AS(batch.buffer<Triple>("z"), invalid_argument);  // 3 bytes do not divide 8 KiB

  PlannedBatch unchecked(pool, plan, solution, {.check_lifetimes = false});
  unchecked.enter_stage("c");
  CHECK(unchecked.buffer<float>("x").size() == 1024);

  MemoryPlan other({"a"});
  other.add_buffer({.name = "x", .bytes = 4_KiB, .first_stage = "a", .last_stage = "a"});
  CHECK_THROWS_AS(PlannedBatch(pool, other, solution), invalid_argument);
}

TEST_CASE("batch images keep the plan's pitch, as pixels or as channels", "[batch]") {
  struct Rgb {
    std::uint8_t r, g, b;
  };
  MemoryPlan plan({"decode", "blur"});
  plan.add_image<std::uint8_t>("rgb", 100, 4, 3, "decode", "blur");  // 300 bytes a row -> 512
  plan.add_array<float>("weights", 9, "decode", "decode");
  Pool pool({.capacity_bytes = 4_MiB}, make_host_device());
  PlannedBatch batch(pool, plan, solve(plan));
  const ArenaImage<Rgb> pixels = batch.image<Rgb>("rgb");
  CHECK(pixels.width() == 100);
  CHECK(pixels.height() == 4);
  CHECK(pixels.pitch_bytes() == 512);
  const ArenaImage<std::uint8_t> channels = batch.image<std::uint8_t>("rgb");
  CHECK(channels.width() == 300);
  std::vector<std::uint8_t> values(1200);
  for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::uint8_t>(i * 31);
  channels.upload(values);
  CHECK(pixels.view().at(1, 2).g == static_cast<std::uint8_t>((2 * 300 + 4) * 31));
  CHECK(channels.to_vector() == values);
  CHECK_THROWS_AS(batch.image<std::uint16_t>("rgb"), invalid_argument);
  CHECK_THROWS_AS(batch.image<float>("weights"), invalid_argument);
}

TEST_CASE("a batch image too wide for a 32-bit view is refused, not truncated", "[batch][errors]") {
  MemoryPlan plan({"only"});
  plan.add_image<std::uint8_t>("wide", std::uint64_t{1} << 32, 1, 1, "only", "only");
  const PlanSolution solution = solve(plan);
  Pool pool({.capacity_bytes = 8_GiB}, make_virtual_device());  // bookkeeping only: no 4 GiB of RAM
  PlannedBatch batch(pool, plan, solution);
  CHECK_THROWS_WITH(batch.image<std::uint8_t>("wide"), Contains("4294967296") && Contains("4294967295"));
}
