// The GPU test program: the pool on the CUDA device. Exits 77 (ctest: skipped) without a GPU.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <utility>

#include <vramkit/vramkit.hpp>

#include "gpu/gpu_kernels.hpp"
#include "support/compaction_property.hpp"
#include "support/first_difference.hpp"
#include "support/patterns.hpp"
#include "support/phased_hole_layout.hpp"

using namespace vramkit;
using namespace vramkit_gpu_test;

namespace {
std::vector<std::uint32_t> expected_index(std::uint64_t count, std::uint32_t key) {
  std::vector<std::uint32_t> values(count);
  for (std::uint64_t i = 0; i < count; ++i) values[i] = key * 2654435761u + static_cast<std::uint32_t>(i);
  return values;
}
}  // namespace

TEST_CASE("a kernel writes through a pinned buffer and the host reads the data back", "[gpu]") {
  Pool pool({.capacity_bytes = 64_MiB}, make_cuda_device());
  REQUIRE(pool.device().kind() == DeviceKind::cuda);
  DeviceBuffer<std::uint32_t> buffer(pool, 1 << 20);
  {
    auto pinned = buffer.pin();
    launch_fill_index(pinned.data(), pinned.size(), 7, nullptr);
    synchronize_device();
  }
  CHECK(vramkit_test::first_difference(buffer.to_vector(), expected_index(1 << 20, 7)) == vramkit_test::no_difference);
}

TEST_CASE("compaction on the GPU keeps every live byte over random operation sequences", "[gpu][compaction]") {
  // VRAMKIT_GPU_PROPERTY_OPS shortens the run under compute-sanitizer, which slows every call.
  const char* operations_text = std::getenv("VRAMKIT_GPU_PROPERTY_OPS");
  const int operations = operations_text != nullptr ? std::atoi(operations_text) : 4000;
  const std::uint64_t seed = std::random_device{}();
  for (std::uint64_t run = 0; run < 2; ++run) {
    vramkit_test::run_property_test(make_cuda_device(), seed + run, operations, 64_MiB);
  }
}

TEST_CASE("the CUDA device refuses a chunk plan its kernels cannot move, and moves one they can",
          "[gpu][compaction]") {
  auto device = make_cuda_device();
  const Region region = device->obtain(8_MiB);
  const std::vector<std::byte> data = vramkit_test::pattern(5, 2_MiB);
  device->copy_from_host(region.address, data.data(), data.size(), nullptr);
  const compactor::CopyRange move{.source = region.address, .destination = region.address + 4_MiB, .bytes = 2_MiB};
  const compactor::ChunkPlan large = compactor::make_chunk_plan({&move, 1}, 1 << 20);
  CHECK_THROWS_WITH(device->execute(large, 1), Catch::Contains("1048576") && Catch::Contains("65536"));
  const compactor::CopyRange odd{.source = region.address + 8, .destination = region.address + 6_MiB, .bytes = 4096};
  CHECK_THROWS_AS(device->execute(compactor::make_chunk_plan({&odd, 1}), 1), vramkit::invalid_argument);
  std::vector<std::byte> back(2_MiB);
  device->copy_to_host(back.data(), region.address + 4_MiB, back.size(), nullptr);
  CHECK(vramkit_test::first_difference(back, data) != vramkit_test::no_difference);  // nothing was moved
  CHECK(device->execute(compactor::make_chunk_plan({&move, 1}), 1).complete);
  device->copy_to_host(back.data(), region.address + 4_MiB, back.size(), nullptr);
  CHECK(vramkit_test::first_difference(back, data) == vramkit_test::no_difference);
  // A caller's plan need not state the limit it was split with: its 64 KiB chunks move whole
  // (by the block form), whatever kernel small moves would get.
  const compactor::CopyRange again{.source = region.address, .destination = region.address + 6_MiB, .bytes = 2_MiB};
  compactor::ChunkPlan unstated = compactor::make_chunk_plan({&again, 1});
  unstated.chunk_bytes = 0;
  CHECK(device->execute(unstated, 1).complete);
  device->copy_to_host(back.data(), region.address + 6_MiB, back.size(), nullptr);
  CHECK(vramkit_test::first_difference(back, data) == vramkit_test::no_difference);
  device->release(region);
}

TEST_CASE("large overlapping slides on the GPU keep memmove semantics", "[gpu][compaction]") {
  Pool pool({.capacity_bytes = 1_GiB}, make_cuda_device());
  // Displacements: under one chunk, exactly one chunk, just under the block size, over it.
  for (std::uint64_t gap : {1_KiB, 64_KiB, 16_MiB - 256, 40_MiB}) {
    INFO("gap " << gap);
    std::vector<Handle> spacers, blocks;
    for (int i = 0; i < 4; ++i) {
      spacers.push_back(pool.allocate(gap));
      blocks.push_back(pool.allocate(16_MiB));
    }
    for (int i = 0; i < 4; ++i) vramkit_test::write_pattern(pool, blocks[i], 1000 + i);
    for (Handle spacer : spacers) pool.free(spacer);
    const CompactionReport report = pool.compact();
    CHECK(report.blocks_moved == 4);
    CHECK(report.fragmentation_after == 0.0);
    for (int i = 0; i < 4; ++i) CHECK(vramkit_test::holds_pattern(pool, blocks[i], 1000 + i));
    for (Handle block : blocks) pool.free(block);
  }
}

TEST_CASE("a compaction whose walk, plan and staging four threads share keeps every byte on the GPU",
          "[gpu][compaction][threads]") {
  // 24,000 kept blocks: above PoolOptions::parallel_update_min_blocks. Planned first, the team
  // walks and plans (Pool::plan_slide) and the CUDA device stages the 24,000 moves in parts with
  // it; by default the team's three other threads write the plan while the GPU runs each prefix
  // written (Pool::write_slide, Device::execute_moves_as_written), also in a pool prepared first
  // (Pool::prepare_compaction: the staging and the device's scratch taken before, the kernels loaded).
  const std::uint64_t seed = std::random_device{}();
  std::printf("shared walk on the GPU: seed %llu\n", static_cast<unsigned long long>(seed));
  INFO("seed " << seed);
  struct Way {
    CompactionParts parts;
    bool prepared;
  };
  for (const auto [parts, prepared] : {Way{CompactionParts::never, false}, Way{CompactionParts::automatic, false},
                                       Way{CompactionParts::never, true}, Way{CompactionParts::automatic, true}}) {
    INFO("parts " << (parts == CompactionParts::never ? "never" : "automatic") << (prepared ? ", prepared" : ""));
    std::mt19937_64 rng(seed);
    Pool pool({.capacity_bytes = 64_MiB, .compaction_parts = parts, .compaction_threads = 4}, make_cuda_device());
    std::vector<Handle> gaps, kept;
    for (int i = 0; i < 36000; ++i) (i % 3 == 0 ? gaps : kept).push_back(pool.allocate(256 * (1 + rng() % 4)));
    for (std::size_t i = 0; i < kept.size(); ++i) vramkit_test::write_pattern(pool, kept[i], i);
    for (Handle gap : gaps) pool.free(gap);
    if (prepared) pool.prepare_compaction();
    const CompactionReport report = pool.compact();
    CHECK(report.plan_threads == 4);
    CHECK(report.written_while_moving == (parts != CompactionParts::never));
    // Written by the team, the walk also wrote the heap's nodes, which the update adopts on one
    // thread (no block stays, so no slot is left to write); planned first, the team rebuilds it.
    CHECK(report.update_threads == (parts == CompactionParts::never ? 4u : 1u));
    CHECK(report.blocks_moved == kept.size());  // the first block was a gap: every kept one slides
    CHECK(report.fragmentation_after == 0.0);
    for (std::size_t i = 0; i < kept.size(); ++i) REQUIRE(vramkit_test::holds_pattern(pool, kept[i], i));
  }
}

TEST_CASE("a buffer released on a stream is moved only after that stream's work, and later work sees the new place",
          "[gpu][streams]") {
  Pool pool({.capacity_bytes = 256_MiB}, make_cuda_device());
  const Stream stream = create_stream();
  DeviceBuffer<std::uint32_t> spacer(pool, 16 << 20);
  DeviceBuffer<std::uint32_t> buffer(pool, 8 << 20);
  const std::uint64_t old_address = pool.address(buffer.handle());
  {
    auto pinned = buffer.pin(stream);  // the pin ends where the stream's kernel ends
    launch_slow_fill_index(pinned.data(), pinned.size(), 99, 200.0, stream);
  }
  spacer.reset();
  const CompactionReport report = pool.compact();  // at once, while the kernel still runs
  CHECK(report.blocks_moved == 1);
  CHECK(pool.address(buffer.handle()) != old_address);
  CHECK(buffer.to_vector() == expected_index(8 << 20, 99));
  {
    auto pinned = buffer.pin(stream);  // work queued after the compaction uses the new place
    launch_fill_index(pinned.data(), pinned.size(), 5, stream);
  }
  synchronize_device();
  CHECK(buffer.to_vector() == expected_index(8 << 20, 5));
  destroy_stream(stream);
}

TEST_CASE("allocation on the GPU fails over to a hole made by a minimal compaction", "[gpu][compaction]") {
  Pool pool({.capacity_bytes = 64_MiB}, make_cuda_device());
  std::vector<Handle> handles;
  for (int i = 0; i < 64; ++i) handles.push_back(pool.allocate(1_MiB));
  for (int i = 0; i < 64; i += 2) pool.free(handles[i]);
  for (int i = 1; i < 64; i += 2) vramkit_test::write_pattern(pool, handles[i], i);
  const Handle big = pool.allocate(8_MiB);
  CHECK(pool.size(big) == 8_MiB);
  for (int i = 1; i < 64; i += 2) CHECK(vramkit_test::holds_pattern(pool, handles[i], i));
}

TEST_CASE("a compaction whose buffers cannot grow beside the outgrown ones waits, frees them and completes",
          "[gpu][compaction][faults]") {
  // The test hook VRAMKIT_CUDA_FAIL_BUFFER_GROWTH=k fails the first try of a device's k-th staging
  // or scratch growth as cudaMalloc does when memory runs out. A pool's first compaction in parts
  // (here parts of 32, 64, 192 and 112 blocks) grows the staging buffer and then the scratch buffer
  // for each of its first three parts, as each part with those before it needs more than the
  // buffers took: growths 1 and 2 are the first allocations, growths 3 to 6 each replace a buffer
  // that work already queued may still use. The device must then wait for that work, free, and
  // allocate again, not fail the compaction. (Nothing here sees whether growth k came; built
  // without the fallback, this test failed at each of the six: docs/benchmarks.md, run 54.)
  for (std::uint64_t growth : {1u, 2u, 3u, 4u, 5u, 6u}) {
    INFO("failed growth " << growth);
    setenv("VRAMKIT_CUDA_FAIL_BUFFER_GROWTH", std::to_string(growth).c_str(), 1);
    std::shared_ptr<Device> device;
    try {
      device = make_cuda_device();
    } catch (...) {
      unsetenv("VRAMKIT_CUDA_FAIL_BUFFER_GROWTH");
      throw;
    }
    unsetenv("VRAMKIT_CUDA_FAIL_BUFFER_GROWTH");
    Pool pool({.capacity_bytes = 160_MiB, .compaction_parts = CompactionParts::always, .free_cache_bytes = 0}, device);
    std::mt19937_64 rng(growth);
    std::vector<Handle> kept, gaps;
    for (std::uint64_t i = 0; i < 400; ++i) {
      gaps.push_back(pool.allocate(64_KiB * (1 + rng() % 2)));
      kept.push_back(pool.allocate(64_KiB * (1 + rng() % 3)));
      vramkit_test::write_pattern(pool, kept.back(), i);
    }
    for (Handle gap : gaps) pool.free(gap);
    CompactionReport report;
    try {  // not inside CHECK_NOTHROW, so that the message shows
      report = pool.compact();
    } catch (const std::exception& error) {
      FAIL_CHECK("compaction failed: " << error.what());  // and go on with the next growth
      continue;
    }
    CHECK(report.blocks_moved == kept.size());
    CHECK(report.fragmentation_after == 0.0);
    for (std::uint64_t i = 0; i < kept.size(); ++i) CHECK(vramkit_test::holds_pattern(pool, kept[i], i));
    CHECK_NOTHROW(pool.check_invariants());
  }
}

TEST_CASE("a move-kernel launch refused after earlier phases ran keeps their moves, and every buffer intact",
          "[gpu][compaction][faults]") {
  // The test hook VRAMKIT_CUDA_FAIL_MOVE_LAUNCH=k refuses a device's k-th move-kernel launch, as a
  // launch refused for its configuration is (not a sticky error). The hole compaction of the
  // layout needs a chunk plan of several phases, one launch each: k = 1 moves nothing; a later k
  // stops after the phases before it, whose moves the pool must keep (their sources may be
  // overwritten by then).
  const auto compaction = vramkit_test::PhasedHoleLayout::compaction();
  std::uint64_t launch = 1;
  for (;; ++launch) {
    INFO("refused launch " << launch);
    setenv("VRAMKIT_CUDA_FAIL_MOVE_LAUNCH", std::to_string(launch).c_str(), 1);
    std::shared_ptr<Device> device = make_cuda_device();
    unsetenv("VRAMKIT_CUDA_FAIL_MOVE_LAUNCH");
    Pool pool({.capacity_bytes = vramkit_test::PhasedHoleLayout::capacity_bytes, .compact_on_failure = false,
               .free_cache_bytes = 0},
              device);
    const auto kept = vramkit_test::build_phased_hole_layout(pool);
    std::string error;
    bool goal_met = false;
    try {  // not inside CHECK, which would take the exception for a failure of its own
      goal_met = pool.compact(compaction).goal_met;
    } catch (const device_error& failure) {
      error = failure.what();
    }
    CHECK((goal_met || !error.empty()));
    INFO("error: " << error);
    for (const auto& [handle, key] : kept) CHECK(vramkit_test::holds_pattern(pool, handle, key));
    CHECK_NOTHROW(pool.check_invariants());
    if (error.empty()) break;  // every launch of the compaction ran
    CHECK_THAT(error, Catch::Contains("cudaErrorLaunchOutOfResources"));
    if (launch == 1) {
      CHECK(pool.statistics().blocks_moved == 0);
    } else {  // the phases before the refused one ran, and their moves are kept
      CHECK_THAT(error, Catch::StartsWith("compaction stopped after"));
      CHECK(pool.statistics().blocks_moved > 0);
    }
    // The pool compacts again once launches are not refused.
    CHECK(pool.compact(compaction).goal_met);
    for (const auto& [handle, key] : kept) CHECK(vramkit_test::holds_pattern(pool, handle, key));
  }
  CHECK(launch >= 3);  // at least two phases: a launch refused after one ran was tried
}

TEST_CASE("two pools on one GPU whose teams write their slides at the same time keep every byte",
          "[gpu][compaction][threads]") {
  // Each pool stages its slide in memory of its own: with a staging room that the device lent,
  // one pool's walkers could write over the other's records (review of a386570).
  std::shared_ptr<Device> device = make_cuda_device();
  struct Side {
    std::unique_ptr<Pool> pool;
    std::vector<std::pair<Handle, std::uint64_t>> kept;  // with the key of its pattern
  };
  std::vector<Side> sides(2);
  for (std::size_t side = 0; side < sides.size(); ++side) {
    Side& mine = sides[side];
    mine.pool = std::make_unique<Pool>(PoolOptions{.capacity_bytes = 64_MiB, .compaction_threads = 4}, device);
    std::mt19937_64 rng(side);
    std::vector<Handle> gaps;
    for (std::uint64_t i = 0; i < 36000; ++i) {
      const Handle handle = mine.pool->allocate(256 * (1 + rng() % 4));
      if (i % 3 == 0) {
        gaps.push_back(handle);
      } else {
        vramkit_test::write_pattern(*mine.pool, handle, 1000000 * side + i);
        mine.kept.emplace_back(handle, 1000000 * side + i);
      }
    }
    for (Handle gap : gaps) mine.pool->free(gap);
  }
  for (int round = 0; round < 3; ++round) {
    std::vector<CompactionReport> reports(2);
    std::thread other([&] { reports[1] = sides[1].pool->compact(); });
    reports[0] = sides[0].pool->compact();
    other.join();
    for (std::size_t side = 0; side < sides.size(); ++side) {
      Side& mine = sides[side];
      INFO("round " << round << ", pool " << side);
      CHECK(reports[side].plan_threads == 4);
      CHECK(reports[side].written_while_moving);
      CHECK(reports[side].blocks_moved > 0);
      CHECK(reports[side].fragmentation_after == 0.0);
      for (const auto& [handle, key] : mine.kept) REQUIRE(vramkit_test::holds_pattern(*mine.pool, handle, key));
      std::vector<std::pair<Handle, std::uint64_t>> still;  // every tenth freed for the next round
      for (std::size_t i = 0; i < mine.kept.size(); ++i) {
        if (i % 10 == 9) mine.pool->free(mine.kept[i].first);
        else still.push_back(mine.kept[i]);
      }
      mine.kept = std::move(still);
    }
  }
}

TEST_CASE("a part of a slide the team writes whose launch is refused keeps the parts before, and every buffer intact",
          "[gpu][compaction][faults][threads]") {
  // 24,000 kept blocks, the plan written by the team while the GPU runs its prefixes (Pool::write_slide):
  // VRAMKIT_CUDA_FAIL_MOVE_LAUNCH=k refuses the k-th part's move kernel. k = 1 moves nothing; a
  // later k (if the compaction has that many parts, which depends on how fast the team writes)
  // stops after the parts before it, whose moves the pool keeps. Then a compaction finishes.
  for (std::uint64_t launch : {1u, 2u, 3u}) {
    INFO("refused launch " << launch);
    setenv("VRAMKIT_CUDA_FAIL_MOVE_LAUNCH", std::to_string(launch).c_str(), 1);
    std::shared_ptr<Device> device = make_cuda_device();
    unsetenv("VRAMKIT_CUDA_FAIL_MOVE_LAUNCH");
    Pool pool({.capacity_bytes = 64_MiB, .free_cache_bytes = 0, .compaction_threads = 4}, device);
    std::mt19937_64 rng(launch);
    std::vector<Handle> gaps, kept;
    for (int i = 0; i < 36000; ++i) (i % 3 == 0 ? gaps : kept).push_back(pool.allocate(256 * (1 + rng() % 4)));
    for (std::size_t i = 0; i < kept.size(); ++i) vramkit_test::write_pattern(pool, kept[i], i);
    for (Handle gap : gaps) pool.free(gap);
    std::string error;
    try {
      pool.compact();
    } catch (const device_error& failure) {
      error = failure.what();
    }
    INFO("error: " << error);
    if (launch == 1) CHECK_THAT(error, Catch::Contains("cudaErrorLaunchOutOfResources"));
    if (launch == 1) CHECK(pool.statistics().blocks_moved == 0);
    if (launch > 1 && !error.empty()) {
      CHECK_THAT(error, Catch::StartsWith("compaction stopped after"));
      CHECK(pool.statistics().blocks_moved > 0);
    }
    CHECK_NOTHROW(pool.check_invariants());
    for (std::size_t i = 0; i < kept.size(); ++i) REQUIRE(vramkit_test::holds_pattern(pool, kept[i], i));
    const CompactionReport report = pool.compact();
    CHECK(report.plan_threads == 4);
    CHECK(report.written_while_moving);
    CHECK(report.fragmentation_after == 0.0);
    CHECK_NOTHROW(pool.check_invariants());
    for (std::size_t i = 0; i < kept.size(); ++i) REQUIRE(vramkit_test::holds_pattern(pool, kept[i], i));
  }
}

int main(int argc, char** argv) {
  if (!cuda_available()) {
    std::printf("no CUDA device: GPU tests skipped\n");
    return 77;
  }
  std::printf("GPU tests on %s\n", make_cuda_device()->name().c_str());
  return Catch::Session().run(argc, argv);
}
