// A full compaction whose plan the compaction team writes while the device runs what is written
// (Pool::write_slide, Device::execute_moves_as_written): a device fault in any part, or at any move,
// leaves every buffer intact, the pool consistent, and the next compaction finishes the job with
// the layout that one thread makes; the moves that the team stages for a device that takes them
// so (Device::slide_chunk_bytes, the CUDA device's upload) are exactly what the device would stage
// itself. (Equality with compactor::plan_full, over several segments and thread counts:
// tests/parallel_plan_test.cpp.)
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <vramkit/errors.hpp>
#include <vramkit/host_device.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/units.hpp>

#include "compactor/chunk_plan_paths.hpp"
#include "support/forwarding_device.hpp"
#include "support/patterns.hpp"
#include "support/pool_fixtures.hpp"

using namespace vramkit;

namespace {

/// 30,000 kept blocks of 256 and 512 bytes among 60,000 in one segment (every other one freed);
/// the device fails as `faults` says. Returns the map after a compaction without faults.
vramkit_test::BlockMap compact_through(HostFaults faults, unsigned threads, std::uint64_t seed) {
  auto device = std::make_shared<HostDevice>(HostDeviceOptions{.faults = faults, .shuffle_seed = seed | 1});
  Pool pool({.capacity_bytes = 32_MiB, .free_cache_bytes = 0, .compaction_threads = threads}, device);
  const std::vector<Handle> kept = vramkit_test::keep_every_other(pool, 60000, seed);
  std::string error;
  CompactionReport report;
  try {
    report = pool.compact();
  } catch (const device_error& failure) {
    error = failure.what();
  }
  // The first part and a move always exist; how many parts there are depends on how fast the
  // team writes, so a later part's fault may find no part to fail.
  if (faults.move_at != 0 || faults.part_at == 1) CHECK_THAT(error, Catch::Contains("injected"));
  const bool written = threads > 1;  // one thread plans alone (plan_slide)
  if (error.empty()) CHECK(report.plan_threads == threads);
  if (error.empty()) CHECK(report.written_while_moving == written);
  pool.check_invariants();
  for (std::size_t i = 0; i < kept.size(); ++i) REQUIRE(vramkit_test::holds_pattern(pool, kept[i], 2 * i + 1));
  device->set_faults({});
  report = pool.compact();
  CHECK(report.plan_threads == threads);
  CHECK(report.written_while_moving == written);
  pool.check_invariants();
  for (std::size_t i = 0; i < kept.size(); ++i) REQUIRE(vramkit_test::holds_pattern(pool, kept[i], 2 * i + 1));
  CHECK(pool.statistics().fragmentation() == 0.0);
  return vramkit_test::map_of(pool);
}

/// A host device that takes slides staged by its caller, as the CUDA device does, in staging
/// memory of its own, and runs each part from the staged records alone (as the CUDA device does,
/// which never reads the moves of a staged slide). Once the plan is whole
/// it checks that the records staged are exactly those that compactor::detail::make_slide_moves
/// stages from the moves, and that each part moved what those moves say.
class StagingChecker final : public vramkit_test::ForwardingDevice {
 public:
  explicit StagingChecker(std::uint32_t chunk_bytes) : chunk_bytes_(chunk_bytes) {}
  ~StagingChecker() override { CHECK(outstanding == 0); }
  std::size_t parts = 0, records_checked = 0, mismatches = 0, obtained = 0, outstanding = 0;
  bool staged = false;
  /// What the device says of work queued ahead (Device::QueuedAhead), in place of the host
  /// device's answer (never) when set.
  QueuedAhead queued_ahead;
  /// Whether the whole plan was given before the call that said it final (which gave nothing
  /// more): the device moved the slide while the caller still wrote the rest of its bookkeeping.
  bool whole_before_final = false;

  std::uint32_t slide_chunk_bytes() const noexcept override { return chunk_bytes_; }
  void* obtain_staging(std::size_t bytes) override {
    ++obtained;
    ++outstanding;
    return ::operator new(bytes);
  }
  void release_staging(void* memory) noexcept override {
    if (memory == nullptr) return;
    --outstanding;
    ::operator delete(memory);
  }
  /// What reserve_moves was last asked for, and how often.
  std::size_t reservations = 0, reserved_moves = 0;
  std::uint64_t reserved_bytes = 0;
  bool reserved_caller_stages = false;
  void reserve_moves(std::size_t moves, std::uint64_t bytes, bool caller_stages) override {
    ++reservations;
    reserved_moves = moves;
    reserved_bytes = bytes;
    reserved_caller_stages = caller_stages;
  }
  ExecutionResult execute_moves_as_written(gsl::span<const compactor::Move> room,
                                           gsl::span<const std::uint64_t> segment_bases, compactor::ChunkPlan& scratch,
                                           const MovesWritten& written, const std::function<void()>& meanwhile,
                                           const HostThreads* threads, compactor::detail::SlideMove* staging) override {
    staged = staging != nullptr;
    if (!staged) return host_->execute_moves_as_written(room, segment_bases, scratch, written, meanwhile, threads, nullptr);
    // The moves as the records give them (no tags: a device does not read them).
    std::vector<compactor::Move> from_records(room.size());
    std::size_t count = 0;
    const MovesWritten from_staging = [&](bool& final, const QueuedAhead& ahead) {
      const std::size_t before = count;
      // As Device::QueuedAhead promises, a no holds until the part this call gives.
      bool said_no = false;
      const QueuedAhead answer = [&] {
        if (!said_no) said_no = !(queued_ahead ? queued_ahead() : ahead());
        return !said_no;
      };
      count = written(final, answer);
      for (std::size_t index = before; index < count; ++index) {
        const compactor::detail::SlideMove& record = staging[index];
        const auto segment = static_cast<std::uint32_t>(
            std::upper_bound(segment_bases.begin(), segment_bases.end(), record.source) - segment_bases.begin() - 1);
        from_records[index] = {.tag = 0,
                               .from_segment = segment,
                               .from_offset = record.source - segment_bases[segment],
                               .to_segment = segment,
                               .to_offset = record.destination - segment_bases[segment],
                               .bytes = record.bytes};
      }
      if (count != before) ++parts;
      if (final) whole_before_final = count == before && count != 0;
      if (final) check_records(room.first(count), segment_bases, staging, from_records);
      return count;
    };
    return host_->execute_moves_as_written(from_records, segment_bases, scratch, from_staging, meanwhile, threads,
                                           nullptr);
  }

 private:
  void check_records(gsl::span<const compactor::Move> moves, gsl::span<const std::uint64_t> segment_bases,
                     const compactor::detail::SlideMove* staging, gsl::span<const compactor::Move> from_records) {
    std::vector<compactor::detail::SlideMove> expected(moves.size());
    std::size_t staged_count = 0;
    std::uint64_t total = 0, bytes = 0;
    REQUIRE(compactor::detail::make_slide_moves(moves, segment_bases, chunk_bytes_, expected.data(), staged_count,
                                                total, bytes));
    REQUIRE(staged_count == moves.size());  // every move of a slide copies something
    records_checked = moves.size();
    for (std::size_t index = 0; index < moves.size(); ++index) {
      const compactor::Move& move = moves[index];
      const compactor::Move& ran = from_records[index];
      if (std::memcmp(&expected[index], &staging[index], sizeof(expected[index])) != 0 ||
          ran.from_segment != move.from_segment || ran.from_offset != move.from_offset ||
          ran.to_segment != move.to_segment || ran.to_offset != move.to_offset || ran.bytes != move.bytes)
        ++mismatches;
    }
  }

  std::uint32_t chunk_bytes_;
};

}  // namespace

TEST_CASE("the moves that the team stages for the device are those the device would stage",
          "[parallel][compaction][threads]") {
  const std::uint64_t seed = std::random_device{}();
  std::cout << "staged slide: seed " << seed << "\n";
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  for (const std::uint32_t chunk_bytes : {128u, 8192u}) {  // moves of 2 to 8 chunks, and of 1
    for (const std::uint64_t segment_bytes : {64_MiB, 24_MiB}) {  // one segment, or two
      INFO("chunks of " << chunk_bytes << " bytes, segments of " << segment_bytes << " bytes");
      auto device = std::make_shared<StagingChecker>(chunk_bytes);
      Pool pool({.capacity_bytes = segment_bytes, .max_capacity_bytes = 64_MiB, .free_cache_bytes = 0,
                 .compaction_threads = 4},
                device);
      std::vector<Handle> all, kept;
      std::vector<std::uint64_t> keys;
      // Blocks of 256 B..1 KiB, then every other one freed after the first 500 (which stay).
      while (all.size() < 70000) all.push_back(pool.allocate(256 * (1 + rng() % 4)));
      for (std::size_t i = 0; i < all.size(); ++i) {
        if (i < 500 || i % 2 == 1) {
          kept.push_back(all[i]);
          keys.push_back(i);
          vramkit_test::write_pattern(pool, all[i], i);
        } else {
          pool.free(all[i]);
        }
      }
      const CompactionReport report = pool.compact({.release_empty_segments = false});
      CHECK(report.plan_threads == 4);
      CHECK(report.written_while_moving);
      CHECK(report.blocks_moved > 30000);
      // Staged when the segments ascend, as the device's searches need (host memory: either way).
      const bool bases_ascend = pool.statistics().segments == 1 || pool.address(all[1]) < pool.address(all.back());
      CHECK(device->staged == bases_ascend);
      CHECK(device->obtained == (device->staged ? 1u : 0u));  // the pool's own staging memory, taken once
      if (device->staged) {
        CHECK(device->parts >= 1);
        CHECK(device->records_checked == report.blocks_moved);
        CHECK(device->mismatches == 0);
      }
      pool.check_invariants();
      for (std::size_t i = 0; i < kept.size(); ++i) REQUIRE(vramkit_test::holds_pattern(pool, kept[i], keys[i]));
      std::size_t segment = SIZE_MAX, free_blocks = 0;  // each segment's live blocks packed from its start
      for (const BlockInfo& block : pool.block_map()) {
        if (block.segment != segment) segment = block.segment, free_blocks = 0;
        if (block.state == BlockState::free) ++free_blocks;
        else CHECK(free_blocks == 0);
      }
    }
  }
}

TEST_CASE("a written slide is held back while the device has work queued ahead and given once it has none",
          "[parallel][compaction][threads]") {
  const std::uint64_t seed = std::random_device{}();
  std::cout << "written slide, queued ahead: seed " << seed << "\n";
  INFO("seed " << seed);
  std::mt19937_64 rng(seed);
  // Never queued ahead, always, or now and then (the calling thread then readies pieces at times
  // and watches for the next part at others; it stops asking once told no, until it gives a part).
  for (const int mode : {0, 1, 2}) {
    INFO("work queued ahead: " << (mode == 0 ? "never" : mode == 1 ? "always" : "now and then"));
    auto device = std::make_shared<StagingChecker>(256);
    if (mode == 1) device->queued_ahead = [] { return true; };
    if (mode == 2) device->queued_ahead = [&rng] { return rng() % 3 == 0; };
    Pool pool({.capacity_bytes = 64_MiB, .free_cache_bytes = 0, .compaction_threads = 4}, device);
    const std::vector<Handle> kept = vramkit_test::keep_every_other(pool, 60000, seed);
    const CompactionReport report = pool.compact();
    CHECK(report.written_while_moving);
    REQUIRE(device->staged);
    CHECK(device->mismatches == 0);
    CHECK(device->records_checked == report.blocks_moved);
    // A device that always has work queued gets the plan whole, once the walk is done. (An idle
    // one usually gets several parts, but not always: the team may walk every piece before the
    // calling thread looks.)
    if (mode == 1) CHECK(device->parts == 1);
    else CHECK(device->parts >= 1);
    // Either way the device has the whole slide before the team has written the rest (the heaps'
    // nodes, the slots): it moves while they are written.
    CHECK(device->whole_before_final);
    pool.check_invariants();
    for (std::size_t i = 0; i < kept.size(); ++i) REQUIRE(vramkit_test::holds_pattern(pool, kept[i], 2 * i + 1));
    CHECK(pool.statistics().fragmentation() == 0.0);
  }
}

TEST_CASE("a compaction whose plan the team writes while the device runs it keeps every byte through a fault",
          "[parallel][compaction][faults][threads]") {
  const std::uint64_t seed = std::random_device{}();
  std::cout << "written slide after a fault: seed " << seed << "\n";
  INFO("seed " << seed);
  const vramkit_test::BlockMap reference = compact_through({}, 1, seed);
  for (const HostFaults faults : {HostFaults{.move_at = 1}, HostFaults{.move_at = 1500}, HostFaults{.move_at = 20000},
                                  HostFaults{.part_at = 1}, HostFaults{.part_at = 2}, HostFaults{.part_at = 3}}) {
    for (const unsigned threads : {3u, 4u}) {  // the team writes the plan (written_while_moving)
      INFO("move_at " << faults.move_at << ", part_at " << faults.part_at << ", " << threads << " threads");
      CHECK(compact_through(faults, threads, seed) == reference);
    }
  }
}

TEST_CASE("a pool prepared for compaction takes its staging and the device's room before the first compaction",
          "[compaction][threads]") {
  // Pool::prepare_compaction: the team that writes the slide stages its moves in the pool's own
  // staging memory, taken now and used by the compaction (no second one); the device is asked for
  // the room of the live blocks and their bytes, told whether the caller stages. One thread alone
  // plans first, and the device stages: no staging memory is taken.
  const std::uint64_t seed = std::random_device{}();
  std::cout << "prepared pool: seed " << seed << "\n";
  INFO("seed " << seed);
  for (const unsigned threads : {4u, 1u}) {
    INFO(threads << " threads");
    auto device = std::make_shared<StagingChecker>(8192);
    Pool pool({.capacity_bytes = 32_MiB, .free_cache_bytes = 0, .compaction_threads = threads}, device);
    const std::vector<Handle> kept = vramkit_test::keep_every_other(pool, 60000, seed);
    pool.prepare_compaction();
    const bool writes = threads > 1;
    CHECK(device->obtained == (writes ? 1u : 0u));
    CHECK(device->reservations == 1);
    CHECK(device->reserved_moves == kept.size());
    CHECK(device->reserved_bytes == pool.statistics().used_bytes);
    CHECK(device->reserved_caller_stages == writes);
    CHECK(pool.statistics().compactions == 0);  // nothing moved
    for (std::size_t i = 0; i < kept.size(); ++i) REQUIRE(vramkit_test::holds_pattern(pool, kept[i], 2 * i + 1));
    const CompactionReport report = pool.compact();
    CHECK(report.written_while_moving == writes);
    CHECK(device->staged == writes);
    CHECK(device->obtained == (writes ? 1u : 0u));  // the staging that prepare_compaction took
    CHECK(device->mismatches == 0);
    CHECK(report.blocks_moved == kept.size());
    CHECK(report.fragmentation_after == 0.0);
    pool.check_invariants();
    for (std::size_t i = 0; i < kept.size(); ++i) REQUIRE(vramkit_test::holds_pattern(pool, kept[i], 2 * i + 1));
  }
}
