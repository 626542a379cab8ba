#pragma once
// Trace replay: reads an allocation trace (CSV `op,id,size,stream`, as in shared/traces) and replays
// it on a real Pool with one segment of a fixed capacity (no growth), to measure footprint, success
// rate and the bytes compaction moves. The reader validates the whole trace before anything runs, so
// a replay never meets a free of an unknown id or a double free.
//
// Costs: reading is O(requests) with one hash lookup per request; a replay is one pool call per
// request plus, with verification, writing every allocated byte once and reading it back before its
// free and after every compaction.
#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <istream>
#include <memory>
#include <string>
#include <vector>

#include <vramkit/device.hpp>
#include <vramkit/pool.hpp>
#include <vramkit/statistics.hpp>

namespace vramkit {

enum class TraceOp : std::uint8_t { allocate, free };

/// One request. `allocation` is a dense index in [0, Trace::allocations) given in order of first
/// appearance, so replays can keep handles in a vector; `id` is the trace's own id.
struct TraceRequest {
  TraceOp op = TraceOp::allocate;
  std::uint32_t allocation = 0;
  std::uint64_t id = 0;
  std::uint64_t bytes = 0;  ///< For a free: the bytes its allocation asked for.
  std::uint64_t stream = 0;
};

/// A validated trace. Invariants: every free names an earlier allocation that is live at that point;
/// no id is allocated twice; 0 < bytes <= max_trace_request_bytes.
struct Trace {
  std::string name;
  std::vector<TraceRequest> requests;
  std::uint32_t allocations = 0;
  std::uint64_t allocated_bytes = 0;  ///< Sum over all allocations.
  std::uint64_t peak_live_bytes = 0;  ///< Of the requested sizes, over the trace.
};

/// Sizes above this (2^48 bytes, 256 TiB) are rejected as absurd.
inline constexpr std::uint64_t max_trace_request_bytes = 1ull << 48;

/// Parses a trace. Throws vramkit::invalid_argument naming `name` and the line number for a missing
/// or wrong header, a malformed line, a negative, zero or absurd size, a duplicate allocation id, a
/// free of an unknown id and a double free.
Trace read_trace(std::istream& input, std::string name);
/// read_trace on a file; throws vramkit::invalid_argument when it cannot be opened.
Trace read_trace_file(const std::filesystem::path& path);

enum class ReplayPolicy {
  none,        ///< Never compact: a request that finds no free block fails.
  on_failure,  ///< The pool's own minimal compaction before failing (PoolOptions::compact_on_failure).
  threshold,   ///< on_failure, plus DefragPolicy::maybe_compact after every free.
};
/// What on_failure (and threshold) does when a request finds no free block.
enum class FailureMode {
  minimal,  ///< The pool's targeted compaction: one hole, moving as few bytes as possible.
  full,     ///< Baseline: a full compaction (pool.compact()), then one retry.
};
const char* to_string(ReplayPolicy policy);
const char* to_string(FailureMode mode);

struct ReplayOptions {
  std::uint64_t capacity_bytes = 0;  ///< The pool's one segment; required.
  ReplayPolicy policy = ReplayPolicy::on_failure;
  FailureMode failure_mode = FailureMode::minimal;
  DeviceChoice device = DeviceChoice::virtual_memory;
  /// Host and CUDA devices: write a pattern derived from the id into every allocation, check every
  /// live allocation after every compaction and each allocation before its free.
  bool verify = false;
  /// 256: what cudaMalloc guarantees and the pool's granularity, so no block ever needs padding.
  std::uint64_t alignment = 256;
  std::uint64_t granularity = 256;
  /// PoolOptions::free_cache_bytes of the replaying pool (the cache of freed blocks; 0: off).
  std::uint64_t free_cache_bytes = PoolOptions::automatic_cache;
  /// threshold: the policy's clock advances this much per request (1 request = 1 ms).
  std::chrono::steady_clock::duration request_interval = std::chrono::milliseconds(1);
  double fragmentation_threshold = 0.30;
  std::chrono::steady_clock::duration min_interval = std::chrono::seconds(1);  ///< 1,000 requests.
  /// Stop at the first failed allocation (the footprint search uses this).
  bool stop_on_failure = false;
  /// About this many samples of used/reserved/fragmentation over the trace (0: none).
  std::size_t samples = 0;
  /// Called with (requests done, requests) about every 1% of the trace.
  std::function<void(std::size_t, std::size_t)> progress;
};

struct ReplaySample {
  std::size_t request = 0;
  std::uint64_t used_bytes = 0;
  std::uint64_t reserved_bytes = 0;
  double fragmentation = 0;
};

struct ReplayResult {
  std::size_t requests = 0;
  std::size_t allocation_requests = 0;
  std::size_t failed_requests = 0;  ///< Allocations that found no block (their frees are skipped).
  std::uint64_t capacity_bytes = 0;
  std::uint64_t allocated_bytes = 0;  ///< Of the allocations that succeeded.
  std::uint64_t peak_used_bytes = 0;  ///< The pool's, in blocks (rounded to the granularity).
  std::uint64_t compactions = 0;
  std::uint64_t bytes_moved = 0;
  bool verified = false;  ///< With verify: every check passed (a failed one throws).
  std::chrono::duration<double> seconds{0};
  std::vector<ReplaySample> samples;

  double success_rate() const;
  /// bytes moved / bytes allocated.
  double moved_ratio() const;
};

/// Replays on a pool over `device` (a new device of options.device when null). Throws
/// corruption_error when verification finds a wrong byte, invalid_argument for bad options, and
/// device_error for device failures; failed allocations are counted, not thrown.
ReplayResult replay(const Trace& trace, const ReplayOptions& options,
                    std::shared_ptr<Device> device = nullptr);

struct FootprintResult {
  std::uint64_t footprint_bytes = 0;  ///< The smallest capacity (a multiple of resolution) that served all.
  ReplayResult replay;                ///< The replay at that capacity.
  std::size_t replays = 0;            ///< How many replays the search ran.
};

/// Bisection on the capacity, in steps of `resolution`, for the smallest at which every request of
/// the trace succeeds under options (its capacity_bytes is ignored). Assumes that success is monotone
/// in the capacity (true for compacting policies in practice; not guaranteed for `none`).
FootprintResult find_footprint(const Trace& trace, ReplayOptions options,
                               std::uint64_t resolution = 1ull << 20);

/// An SVG chart (polylines) of used bytes, reserved bytes and fragmentation over the samples.
std::string replay_svg(const Trace& trace, const ReplayResult& result);

}  // namespace vramkit
