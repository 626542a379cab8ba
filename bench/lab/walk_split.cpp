// Lab (not built by CMake): the written slide's walk (Pool::write_slide) against a simulated GPU,
// on the host alone. A device that forwards to the virtual device takes the slide staged, as the
// CUDA device does, and "moves" each part as a GPU would: a part starts `launch_us` after it is
// given or when the part before it ends, whichever is later, and takes `ns_per_move` a move; its
// QueuedAhead says whether the part before the last has not ended. compact() returns once the
// last part has ended (the device spins until then). Layout (b) of the compaction benchmark,
// a pool's next compaction, median of `repeats`. It shows how the walk's passes line up with a
// device of a given speed on this host, without a GPU.
// Build (after a Release build in build-rel):
//   g++ -O2 -std=c++20 -pthread -Iinclude -I/usr/local/cuda/include -Ilib -Ibench bench/lab/walk_split.cpp build-rel/lib/libvramkit.a \
//       -o walk_split
// Run: ./walk_split [ns_per_move, default 8.5] [launch_us, default 10] [repeats, default 9] [threads]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <vector>

#include <vramkit/pool.hpp>

#include "compaction_layouts.hpp"
#include "compactor/slide_math.hpp"

using namespace vramkit;
using Clock = std::chrono::steady_clock;

namespace {

class SimulatedGpu final : public Device {
 public:
  SimulatedGpu(double ns_per_move, double launch_us) : ns_per_move_(ns_per_move), launch_us_(launch_us) {}
  std::size_t parts = 0;
  double first_part_us = 0, last_part_us = 0, end_us = 0;

  DeviceKind kind() const noexcept override { return inner_->kind(); }
  std::string name() const override { return "simulated GPU"; }
  Region obtain(std::uint64_t bytes) override { return inner_->obtain(bytes); }
  void release(Region region) noexcept override { inner_->release(region); }
  void copy_from_host(std::uint64_t d, const void* s, std::uint64_t b, Stream st) override { inner_->copy_from_host(d, s, b, st); }
  void copy_to_host(void* d, std::uint64_t s, std::uint64_t b, Stream st) override { inner_->copy_to_host(d, s, b, st); }
  void fill(std::uint64_t d, std::byte v, std::uint64_t b, Stream st) override { inner_->fill(d, v, b, st); }
  std::uint64_t find_mismatch(std::uint64_t a, std::byte v, std::uint64_t b) override { return inner_->find_mismatch(a, v, b); }
  ExecutionResult execute(const compactor::ChunkPlan& plan, std::size_t moves) override { return inner_->execute(plan, moves); }
  ExecutionResult execute_moves(gsl::span<const compactor::Move> moves, gsl::span<const std::uint64_t> bases,
                                compactor::ChunkPlan& scratch, const std::function<void()>& meanwhile,
                                const HostThreads* threads) override {
    return inner_->execute_moves(moves, bases, scratch, meanwhile, threads);
  }
  DeviceMemoryInfo memory_info() override { return inner_->memory_info(); }
  bool host_addressable() const noexcept override { return inner_->host_addressable(); }
  std::uint32_t slide_chunk_bytes() const noexcept override { return 8192; }
  void* obtain_staging(std::size_t bytes) override { return ::operator new(bytes); }
  void release_staging(void* memory) noexcept override { ::operator delete(memory); }

  ExecutionResult execute_moves_as_written(gsl::span<const compactor::Move>, gsl::span<const std::uint64_t>,
                                           compactor::ChunkPlan&, const MovesWritten& written,
                                           const std::function<void()>& meanwhile, const HostThreads*,
                                           compactor::detail::SlideMove*) override {
    const auto started = Clock::now();
    const auto us = [&] { return std::chrono::duration<double, std::micro>(Clock::now() - started).count(); };
    std::vector<double> ends;
    const QueuedAhead ahead = [&] { return ends.size() >= 2 && us() < ends[ends.size() - 2]; };
    std::size_t given = 0;
    parts = 0;
    for (bool final = false; !final;) {
      const std::size_t count = written(final, ahead);
      if (count == given) continue;
      const double now = us();
      if (parts++ == 0) first_part_us = now;
      last_part_us = now;
      const double start = std::max(now + launch_us_, ends.empty() ? 0.0 : ends.back());
      ends.push_back(start + (count - given) * ns_per_move_ / 1e3);
      given = count;
    }
    if (meanwhile) meanwhile();
    while (!ends.empty() && us() < ends.back()) {
    }
    end_us = us();
    return {};
  }

 private:
  double ns_per_move_, launch_us_;
  std::shared_ptr<Device> inner_ = make_virtual_device();
};

}  // namespace

int main(int argc, char** argv) {
  const double ns_per_move = argc > 1 ? std::atof(argv[1]) : 8.5;
  const double launch_us = argc > 2 ? std::atof(argv[2]) : 10;
  const int repeats = argc > 3 ? std::atoi(argv[3]) : 9;
  const unsigned threads = argc > 4 ? static_cast<unsigned>(std::atoi(argv[4])) : 0;
  const auto layout = vramkit_bench::random_layout("(b)", 100000, 256, 64 << 10, 1.0, 2);
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < layout.keep.size(); ++i) total += layout.keep[i] + layout.gap[i];
  auto device = std::make_shared<SimulatedGpu>(ns_per_move, launch_us);
  PoolOptions options{.capacity_bytes = total + (4 << 20)};
  if (threads != 0) options.compaction_threads = threads;
  Pool pool(options, device);
  struct Row {
    double seconds, plan, given, first, last, end;
    std::size_t parts;
    unsigned threads;
  };
  std::vector<Row> rows;
  for (int round = 0; round <= repeats; ++round) {  // round 0: the pool's first compaction, not counted
    auto [kept, gaps] = vramkit_bench::allocate_layout(pool, layout);
    for (Handle gap : gaps) pool.free(gap);
    const CompactionReport report = pool.compact({.release_empty_segments = false});
    if (round > 0)
      rows.push_back({report.seconds.count() * 1e3, report.plan_seconds.count() * 1e3,
#ifdef WALK_SPLIT_BEFORE_PLAN_GIVEN  // a library from before CompactionReport::plan_given_seconds
                      0.0,
#else
                      report.plan_given_seconds.count() * 1e3,
#endif
                      device->first_part_us, device->last_part_us,
                      device->end_us, device->parts, report.plan_threads});
    for (Handle handle : kept) pool.free(handle);
  }
  std::sort(rows.begin(), rows.end(), [](const Row& a, const Row& b) { return a.seconds < b.seconds; });
  std::printf("simulated GPU: %.2f ns a move (%.3f ms for 100,000), %.0f us a launch; %u threads; median of %d\n",
              ns_per_move, ns_per_move * 0.1, launch_us, rows.front().threads, repeats);
  for (const Row& row : rows)
    std::printf("  compact %.3f ms  walk %.3f ms  whole plan given %.3f ms  first part %.0f us  last part %.0f us"
                "  device done %.0f us  parts %zu%s\n",
                row.seconds, row.plan, row.given, row.first, row.last, row.end, row.parts,
                &row == &rows[rows.size() / 2] ? "  <- median" : "");
}
