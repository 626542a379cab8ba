// Lab (not built by CMake): layout (b)'s next compaction on the CUDA device, repeated, against one
// cudaMemcpyAsync of the same bytes timed in the same process (the ceiling). No data is written:
// the compaction benchmark verifies data; this measures the pool's timing. Host caches are
// evicted before each compaction (a 512 MB memset), as the benchmark's writes of every buffer do.
//
// With the library patched by part_timeline.patch (this folder) and built with
// -DVRAMKIT_LAB_TIMELINE, the environment sets knobs of the written slide (Pool::write_slide):
//   VRAMKIT_LAB_FIRST, VRAMKIT_LAB_SHARE   first_part_moves, later_part_share
//   VRAMKIT_LAB_HOLD=0                     give parts whatever the device has queued
//   VRAMKIT_LAB_FEED=0|1|2|3               when the calling thread readies pieces: only before the
//                                          first part; as built; always; also until every member
//                                          of the team has begun the walk
//   VRAMKIT_LAB_DEFER=1                    the plan's moves written by the second pass (staged only)
//   VRAMKIT_LAB_NT=1                       the staged records by non-temporal stores
//   VRAMKIT_LAB_WAKE=1                     a 16-byte memset on the move stream as the device call begins
//   VRAMKIT_LAB_SECOND=N                   the second part capped at N moves (its upload shorter)
//   VRAMKIT_LAB_FINE=N                     the slide's first N pieces (a multiple of 4) a quarter of the size
//   VRAMKIT_LAB_FEEDMIN=N                  while a part is queued, the calling thread readies a piece only
//                                          if that part holds at least N moves
// and prints (VRAMKIT_LAB_PRINT=1, or for a call longer than VRAMKIT_LAB_SLOW_US) each part's
// timeline from CUDA events (moves, chunks, when given on the host, its upload and chunk
// derivation, its move) and each piece of the walk (member, taken / published / ready, in microseconds
// from the walk's start). The events add to each device call (the previous call's are destroyed
// as a call begins; the cost was not measured): compare knobs within this build, not with others.
// Without the patch too: the time outside the device call (compact() less its device phase), and
// for each compaction longer than VRAMKIT_LAB_SLOW_US (default 2500) the host's stolen time and
// the process's involuntary context switches while it ran.
// docs/benchmarks.md, runs 73 to 76.
//
// Build (from the repository root):
//   git apply bench/lab/part_timeline.patch
//   cmake -S . -B build-lab -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CUDA_ARCHITECTURES=90 \
//         -DCMAKE_CXX_FLAGS=-DVRAMKIT_LAB_TIMELINE && cmake --build build-lab --target vramkit
//   git apply -R bench/lab/part_timeline.patch
//   g++ -O2 -std=c++20 -pthread -Iinclude -I/usr/local/cuda/include -Ilib -Ibench bench/lab/part_sweep.cpp \
//       build-lab/lib/libvramkit.a -L/usr/local/cuda/lib64 -lcudart_static -ldl -lrt -o part_sweep
// Run: ./part_sweep [iterations, default 9] (one more, the pool's first compaction, is not counted)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include <vramkit/pool.hpp>
#include <vramkit/units.hpp>

#include "compaction_layouts.hpp"

using namespace vramkit;

// The host's stolen time (jiffies of /proc/stat's "steal", all CPUs) and this process's threads'
// involuntary context switches so far: a compaction that stalls for milliseconds with either
// moving had a thread held off its core.
struct HostCounters {
  long long steal = 0, involuntary = 0;
};
HostCounters host_counters() {
  HostCounters counters;
  std::ifstream stat("/proc/stat");
  std::string cpu;
  long long value = 0;
  stat >> cpu;
  for (int field = 0; field < 8 && stat >> value; ++field)
    if (field == 7) counters.steal = value;
  if (DIR* tasks = opendir("/proc/self/task")) {
    while (const dirent* entry = readdir(tasks)) {
      if (entry->d_name[0] == '.') continue;
      std::ifstream status(std::string("/proc/self/task/") + entry->d_name + "/status");
      for (std::string line; std::getline(status, line);)
        if (line.rfind("nonvoluntary_ctxt_switches:", 0) == 0) counters.involuntary += std::stoll(line.substr(27));
    }
    closedir(tasks);
  }
  return counters;
}

int main(int argc, char** argv) {
  const int iterations = argc > 1 ? std::atoi(argv[1]) : 9;
  const auto layout = vramkit_bench::random_layout("b", 100000, 256, 64 << 10, 1.0, 2);
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < layout.keep.size(); ++i) total += layout.keep[i] + layout.gap[i];
  auto device = make_device(DeviceChoice::cuda);
  Pool pool({.capacity_bytes = total + 4_MiB}, device);
  std::vector<char> evict(512u << 20);
  std::vector<double> times, walks, given, outside;
  const double slow_ms = std::getenv("VRAMKIT_LAB_SLOW_US") ? std::atof(std::getenv("VRAMKIT_LAB_SLOW_US")) / 1e3 : 2.5;
  int slow = 0;
  std::uint64_t moved = 0;
  for (int round = 0; round <= iterations; ++round) {
    auto [kept, gaps] = vramkit_bench::allocate_layout(pool, layout);
    for (Handle gap : gaps) pool.free(gap);
    device->synchronize();
    std::memset(evict.data(), round, evict.size());
    const HostCounters before = host_counters();
    const CompactionReport report = pool.compact({.release_empty_segments = false});
    const HostCounters after = host_counters();
    if (report.seconds.count() * 1e3 > slow_ms) {
      if (round > 0) ++slow;  // as the times: the pool's first compaction is not counted
      std::fprintf(stderr, "slow compaction %d: %.3f ms, walk %.3f, device call %.3f; steal +%lld jiffies, "
                   "involuntary switches +%lld\n", round, report.seconds.count() * 1e3, report.plan_seconds.count() * 1e3,
                   report.execute_seconds.count() * 1e3, after.steal - before.steal, after.involuntary - before.involuntary);
    }
    if (round > 0) {
      times.push_back(report.seconds.count() * 1e3);
      outside.push_back((report.seconds - report.execute_seconds).count() * 1e3);
      walks.push_back(report.plan_seconds.count() * 1e3);
      given.push_back(report.plan_given_seconds.count() * 1e3);
    }
    moved = report.bytes_moved;
    for (Handle handle : kept) pool.free(handle);
  }
  // The ceiling: one copy of the moved bytes, device to device.
  void *from = nullptr, *to = nullptr;
  cudaMalloc(&from, moved);
  cudaMalloc(&to, moved);
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<float> copies;
  for (int i = 0; i < 10; ++i) {
    cudaEventRecord(start);
    cudaMemcpyAsync(to, from, moved, cudaMemcpyDeviceToDevice);
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    copies.push_back(ms);
  }
  const auto median = [](auto values) {
    std::sort(values.begin(), values.end());
    return static_cast<double>(values[values.size() / 2]);
  };
  const double ceiling_ms = median(copies);
  std::sort(times.begin(), times.end());
  std::printf("moved %.1f MB; ceiling %.3f ms (%.0f GB/s); compact %.3f..%.3f median %.3f ms = %.0f%% (best %.0f%%); "
              "walk %.3f, given %.3f, outside the device call %.3f ms; slow %d\n",
              moved / 1e6, ceiling_ms, 2 * moved / ceiling_ms / 1e6, times.front(), times.back(), median(times),
              100 * ceiling_ms / median(times), 100 * ceiling_ms / times.front(), median(walks), median(given), median(outside),
              slow);
  return 0;
}
