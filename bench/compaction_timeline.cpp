// Where the time of one pool.compact() goes on the GPU: CUPTI records every kernel, copy and
// memset (and, with --api, every CUDA runtime call) of the compaction, on the same clock as two
// host marks taken around the call. Prints, per run, each GPU operation from the call's start, and
// a summary: when the first move kernel started, how long the move kernels ran, how long the move
// stream sat idle between them, and how long the call went on after the last one ended.
// A probe for docs/benchmarks.md, not a benchmark: CUPTI's own cost is in every figure.
// Usage: vramkit_compaction_timeline [--layout a|b|c] [--parts automatic|always|never] [--threads N] [--repeats N]
//        [--api]   (--threads: PoolOptions::compaction_threads; 0, the default, is automatic)
#include <cupti.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <vramkit/vramkit.hpp>

#include "compaction_layouts.hpp"

using namespace vramkit;

namespace {

struct Record {
  enum class Kind { kernel, copy, memset, api } kind;
  std::string name;
  std::uint32_t stream = 0;
  std::uint64_t start = 0, end = 0;  ///< CUPTI timestamps, ns.
};

std::vector<Record> records;

void check(CUptiResult result, const char* what) {
  if (result == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  cuptiGetResultString(result, &text);
  std::fprintf(stderr, "%s: %s\n", what, text != nullptr ? text : "unknown CUPTI error");
  std::exit(1);
}

// CUPTI asks for a buffer whenever a stream records its first activity after a flush. Buffers are
// taken from a pool of pages touched in advance: a fresh allocation's page faults would land in
// the middle of the compaction being timed.
constexpr std::size_t buffer_bytes = 1 << 20;
std::vector<std::uint8_t*> spare_buffers;

void CUPTIAPI buffer_requested(std::uint8_t** buffer, std::size_t* size, std::size_t* max_records) {
  *size = buffer_bytes;
  if (spare_buffers.empty()) {
    *buffer = static_cast<std::uint8_t*>(std::aligned_alloc(8, buffer_bytes));
  } else {
    *buffer = spare_buffers.back();
    spare_buffers.pop_back();
  }
  *max_records = 0;
}

void CUPTIAPI buffer_completed(CUcontext, std::uint32_t, std::uint8_t* buffer, std::size_t, std::size_t valid) {
  CUpti_Activity* activity = nullptr;
  while (cuptiActivityGetNextRecord(buffer, valid, &activity) == CUPTI_SUCCESS) {
    switch (activity->kind) {
      case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL: {
        const auto* kernel = reinterpret_cast<const CUpti_ActivityKernel10*>(activity);
        std::string name = kernel->name;
        name = name.find("derive") != std::string::npos ? "derive_slide_chunks"
               : name.find("by_warp") != std::string::npos ? "move_chunks_by_warp"
               : name.find("move") != std::string::npos    ? "move_chunks"
                                                           : name.substr(0, 40);
        records.push_back({Record::Kind::kernel, name, kernel->streamId, kernel->start, kernel->end});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMCPY: {
        const auto* copy = reinterpret_cast<const CUpti_ActivityMemcpy6*>(activity);
        records.push_back({Record::Kind::copy, "copy " + std::to_string(copy->bytes) + " B", copy->streamId,
                           copy->start, copy->end});
        break;
      }
      case CUPTI_ACTIVITY_KIND_MEMSET: {
        const auto* memset = reinterpret_cast<const CUpti_ActivityMemset4*>(activity);
        records.push_back({Record::Kind::memset, "memset " + std::to_string(memset->bytes) + " B",
                           memset->streamId, memset->start, memset->end});
        break;
      }
      case CUPTI_ACTIVITY_KIND_RUNTIME: {
        const auto* api = reinterpret_cast<const CUpti_ActivityAPI*>(activity);
        const char* name = nullptr;
        cuptiGetCallbackName(CUPTI_CB_DOMAIN_RUNTIME_API, api->cbid, &name);
        records.push_back({Record::Kind::api, name != nullptr ? name : "?", 0, api->start, api->end});
        break;
      }
      default:
        break;
    }
  }
  spare_buffers.push_back(buffer);
}

std::uint64_t now() {
  std::uint64_t timestamp = 0;
  check(cuptiGetTimestamp(&timestamp), "cuptiGetTimestamp");
  return timestamp;
}

double us(std::uint64_t from, std::uint64_t to) { return (static_cast<double>(to) - static_cast<double>(from)) / 1e3; }

void print_run(int run, const CompactionReport& report, std::uint64_t called, std::uint64_t returned) {
  std::vector<Record> inside;
  for (const Record& record : records) {
    if (record.end >= called && record.start <= returned) inside.push_back(record);
  }
  std::sort(inside.begin(), inside.end(), [](const Record& a, const Record& b) { return a.start < b.start; });
  std::printf("\nrun %d%s: compact() %.1f us (report: walk+plan %.1f us, device call %.1f us, update %.1f us)\n", run,
              run == 0 ? " (the pool's first compaction)" : "",
              us(called, returned), report.plan_seconds.count() * 1e6, report.execute_seconds.count() * 1e6,
              report.update_seconds.count() * 1e6);
  std::printf("  %-28s %7s %10s %10s %9s\n", "operation", "stream", "start us", "end us", "us");
  std::uint64_t first_move = 0, last_move_end = 0, moving = 0, idle = 0;
  int moves = 0;
  for (const Record& record : inside) {
    std::printf("  %-28s %7u %10.1f %10.1f %9.1f\n", record.name.c_str(), record.stream, us(called, record.start),
                us(called, record.end), us(record.start, record.end));
    if (record.kind != Record::Kind::kernel || record.name.rfind("move", 0) != 0) continue;
    if (moves++ == 0) first_move = record.start;
    else if (record.start > last_move_end) idle += record.start - last_move_end;
    moving += record.end - record.start;
    last_move_end = std::max(last_move_end, record.end);
  }
  if (moves == 0) return;
  std::printf("  summary: first move kernel at %.1f us; %d move kernels ran %.1f us, the move stream idle %.1f us "
              "between them; the call returned %.1f us after the last ended\n",
              us(called, first_move), moves, moving / 1e3, idle / 1e3, us(last_move_end, returned));
}

}  // namespace

int main(int argc, char** argv) {
  char layout_name = 'a';
  CompactionParts parts = CompactionParts::automatic;
  int repeats = 3;
  bool api = false;
  unsigned threads = 0;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--layout") && i + 1 < argc && std::strchr("abc", argv[i + 1][0])) {
      layout_name = argv[++i][0];
    } else if (!std::strcmp(argv[i], "--parts") && i + 1 < argc) {
      const std::string value = argv[++i];
      parts = value == "always" ? CompactionParts::always
              : value == "never" ? CompactionParts::never
                                 : CompactionParts::automatic;
    } else if (!std::strcmp(argv[i], "--repeats") && i + 1 < argc) {
      repeats = std::max(1, std::atoi(argv[++i]));
    } else if (!std::strcmp(argv[i], "--threads") && i + 1 < argc) {
      threads = static_cast<unsigned>(std::max(0, std::atoi(argv[++i])));
    } else if (!std::strcmp(argv[i], "--api")) {
      api = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--layout a|b|c] [--parts automatic|always|never] [--threads N] [--repeats N] [--api]\n",
                   argv[0]);
      return 2;
    }
  }
  const vramkit_bench::Layout layout =
      layout_name == 'a'   ? vramkit_bench::random_layout("(a) 10,000 x 4 KiB..1 MiB", 10000, 4096, 1 << 20, 1.0, 1)
      : layout_name == 'b' ? vramkit_bench::random_layout("(b) 100,000 x 256 B..64 KiB", 100000, 256, 64 << 10, 1.0, 2)
                           : vramkit_bench::sliding_layout(1.0);
  auto device = make_device(DeviceChoice::cuda);
  std::printf("compaction timeline on %s: layout %s, %d runs\n", device->name().c_str(), layout.name.c_str(), repeats);

  check(cuptiActivityRegisterCallbacks(buffer_requested, buffer_completed), "cuptiActivityRegisterCallbacks");
  for (CUpti_ActivityKind kind :
       {CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, CUPTI_ACTIVITY_KIND_MEMCPY, CUPTI_ACTIVITY_KIND_MEMSET}) {
    check(cuptiActivityEnable(kind), "cuptiActivityEnable");
  }
  if (api) check(cuptiActivityEnable(CUPTI_ACTIVITY_KIND_RUNTIME), "cuptiActivityEnable");

  for (int i = 0; i < 16; ++i) {
    spare_buffers.push_back(static_cast<std::uint8_t*>(std::aligned_alloc(8, buffer_bytes)));
    std::memset(spare_buffers.back(), 0, buffer_bytes);
  }
  std::uint64_t total = 0;
  for (std::size_t i = 0; i < layout.keep.size(); ++i) total += layout.keep[i] + layout.gap[i];
  // One pool, filled with the layout and compacted again each run: run 0 is the pool's first
  // compaction (its scratch storage unallocated); the runs after it find that storage ready.
  Pool pool({.capacity_bytes = total + (4 << 20), .compaction_parts = parts, .compaction_threads = threads}, device);
  for (int run = 0; run <= repeats; ++run) {
    auto [kept, gaps] = vramkit_bench::allocate_layout(pool, layout);
    for (Handle gap : gaps) pool.free(gap);
    device->synchronize();
    check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
    records.clear();
    const std::uint64_t called = now();
    const CompactionReport report = pool.compact({.release_empty_segments = false});
    const std::uint64_t returned = now();
    device->synchronize();
    check(cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED), "cuptiActivityFlushAll");
    print_run(run, report, called, returned);
    for (Handle handle : kept) pool.free(handle);
  }
  return 0;
}
