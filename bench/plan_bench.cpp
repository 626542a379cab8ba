// Planning cost of a full compaction: plan_full + make_chunk_plan on the layouts of DESIGN.md's
// table (10,000 blocks of 4 KiB..1 MiB; 100,000 blocks of 256 B..64 KiB; 50% of the space free
// between blocks; log-uniform sizes). Host only. Prints the median of several runs. "total" plans
// into fresh storage (its pages faulted in each time); "reused" (plan + chunk) plans as Pool::compact
// does, into storage kept from the run before and from the moves directly.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <random>
#include <vector>

#include "vramkit/compactor/chunk_plan.hpp"
#include "vramkit/compactor/plan.hpp"
#include "vramkit/units.hpp"

using namespace vramkit;
using namespace vramkit::compactor;

namespace {

struct Layout {
  std::vector<LiveBlock> blocks;
  std::uint64_t capacity = 0;
};

Layout make_layout(std::size_t count, std::uint64_t min_bytes, std::uint64_t max_bytes, std::uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> log_size(std::log(double(min_bytes)), std::log(double(max_bytes)));
  std::uniform_real_distribution<double> unit(0, 1);
  Layout layout;
  std::uint64_t cursor = 0;
  for (std::size_t i = 0; i < count; ++i) {
    const std::uint64_t bytes = (static_cast<std::uint64_t>(std::exp(log_size(rng))) + 255) / 256 * 256;
    // A gap in front averaging the block's own size: half the space is free.
    const std::uint64_t gap = static_cast<std::uint64_t>(2 * unit(rng) * double(bytes)) / 256 * 256;
    cursor += gap;
    layout.blocks.push_back({.offset = cursor,
                             .bytes = bytes,
                             .alignment = 256,
                             .movable = true,
                             .tag = static_cast<std::uint32_t>(i)});
    cursor += bytes;
  }
  layout.capacity = cursor;
  return layout;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

template <class F>
double microseconds(F&& work) {
  const auto start = std::chrono::steady_clock::now();
  work();
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count();
}

void run(const char* name, std::size_t count, std::uint64_t min_bytes, std::uint64_t max_bytes) {
  const Layout layout = make_layout(count, min_bytes, max_bytes, 42);
  const SegmentLayout segment{
      .segment = 0, .capacity = layout.capacity, .granularity = 256, .blocks = layout.blocks};
  constexpr int runs = 15;
  std::vector<double> plan_times, chunk_times, validate_times, reused_plan_times, reused_chunk_times;
  std::vector<Move> moves;
  std::vector<CopyRange> ranges;
  ChunkPlan plan;
  // As Pool::compact plans: into storage kept from the last time, from the moves directly.
  std::vector<Move> reused_moves;
  ChunkPlan reused_plan;
  const std::uint64_t segment_bases[] = {0};
  for (int run = 0; run < runs; ++run) {
    plan_times.push_back(microseconds([&] { moves = plan_full(segment); }));
    chunk_times.push_back(microseconds([&] {
      ranges.clear();
      ranges.reserve(moves.size());
      for (const Move& move : moves) ranges.push_back({move.from_offset, move.to_offset, move.bytes});
      plan = make_chunk_plan(ranges, 64 * 1024);
    }));
    if (run < 3) validate_times.push_back(microseconds([&] { plan.validate(); }));
    reused_plan_times.push_back(microseconds([&] {
      reused_moves.clear();
      plan_full(segment, UINT64_MAX, reused_moves);
    }));
    reused_chunk_times.push_back(
        microseconds([&] { make_chunk_plan(reused_moves, segment_bases, reused_plan, 64 * 1024); }));
  }
  const double plan_us = median(plan_times);
  const double chunk_us = median(chunk_times);
  const double reused_us = median(reused_plan_times) + median(reused_chunk_times);
  std::printf("%-28s %8zu %8zu %8zu %6zu %10s %10.1f %10.1f %10.1f %12.1f %12.1f %16.1f\n", name, count,
              moves.size(), plan.chunks.size(), plan.phases(), format_bytes(plan.total_bytes).c_str(),
              plan_us, chunk_us, plan_us + chunk_us, median(validate_times), reused_us,
              median(reused_plan_times));
}

}  // namespace

int main() {
  std::printf("%-28s %8s %8s %8s %6s %10s %10s %10s %10s %12s %12s %16s\n", "layout (50% free)", "blocks", "moves",
              "chunks", "phases", "moved", "plan us", "chunk us", "total us", "validate us", "reused us",
              "reused plan us");
  run("4 KiB..1 MiB", 10'000, 4_KiB, 1_MiB);
  run("256 B..64 KiB", 100'000, 256, 64_KiB);
  return 0;
}
