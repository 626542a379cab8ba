#pragma once
// Device: the only layer that touches memory. It obtains and releases regions, copies between host
// and device, fills, runs a compaction's chunk plan, orders work after stream uses, and reports free
// memory. Three implementations: CUDA (cudaMalloc, streams, events, the move kernel), host
// (simulated device memory in host RAM, with optional fault injection) and virtual (no memory at
// all: addresses without bytes, for trace replay and planning). Everything above is identical.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <gsl/span>

#include <vramkit/compactor/chunk_plan.hpp>
#include <vramkit/compactor/plan.hpp>

struct CUstream_st;

namespace vramkit {
namespace compactor::detail {
struct SlideMove;  // compactor/slide_math.hpp (internal): a slide's move as the CUDA device uploads it
}

/// A CUDA stream (the same type as cudaStream_t). nullptr is the default stream.
using Stream = CUstream_st*;

enum class DeviceKind { cuda, host, virtual_memory };
const char* to_string(DeviceKind kind);

/// A contiguous device allocation. address is the device address as an integer.
struct Region {
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
};

struct DeviceMemoryInfo {
  std::uint64_t free_bytes = 0;
  std::uint64_t total_bytes = 0;
};

/// An event recorded where a stream's use of a buffer ends (at a pin released on a stream).
using UseToken = std::uint64_t;

/// Host threads that a caller lends a device call (a pool's compaction team): run(parts, task)
/// calls task(k) once for every k < parts, parts at most `count`, at the same time on different
/// threads, and returns once every call has returned. task must not throw.
struct HostThreads {
  unsigned count = 1;
  std::function<void(unsigned parts, const std::function<void(unsigned)>& task)> run;
};

/// What a chunk plan's execution achieved: all moves, or (after a device error) the moves whose
/// every chunk was written. A move not listed as complete has not written anything that another
/// live block still needed.
struct ExecutionResult {
  bool complete = true;
  std::vector<std::uint8_t> move_completed;  ///< One entry per move, when !complete.
  std::string error;

  /// Room to report a failure among up to `moves` moves, taken before anything runs: a device
  /// that fails after moves ran must report which, and host memory may be what ran out. Throws
  /// std::bad_alloc (nothing has run yet).
  void reserve_failure(std::size_t moves);
  /// Marks the execution failed: of `moves` moves, [0, completed_prefix) complete, the rest not
  /// (a device then marks more); the error text is `what`, cut to the room reserved. Allocates
  /// nothing once reserve_failure(moves) was called.
  void fail(const char* what, std::size_t moves, std::size_t completed_prefix) noexcept;
};

class Device {
 public:
  virtual ~Device() = default;
  virtual DeviceKind kind() const noexcept = 0;
  /// "NVIDIA H200 (CUDA device 0)", "host (simulated device memory)", ...
  virtual std::string name() const = 0;

  /// A new region of exactly `bytes`. Throws out_of_memory when the device has too little, or
  /// device_error for any other failure.
  virtual Region obtain(std::uint64_t bytes) = 0;
  virtual void release(Region region) noexcept = 0;

  /// Synchronous copies: when they return, the bytes are in place. Ordered after earlier work on
  /// `stream`.
  virtual void copy_from_host(std::uint64_t destination, const void* source, std::uint64_t bytes,
                              Stream stream) = 0;
  virtual void copy_to_host(void* destination, std::uint64_t source, std::uint64_t bytes, Stream stream) = 0;
  virtual void fill(std::uint64_t destination, std::byte value, std::uint64_t bytes, Stream stream) = 0;
  /// Compares `bytes` bytes at `address` with `value`; returns the offset of the first that differs,
  /// or `bytes` when all match. Used for guard margins.
  virtual std::uint64_t find_mismatch(std::uint64_t address, std::byte value, std::uint64_t bytes) = 0;

  /// Runs every chunk of the plan (phases in order) after all work that order_after() named, and
  /// returns once the moved bytes are in place. A phase that cannot start after earlier ones ran
  /// (the CUDA device: a launch refused) ends the execution with a result that marks the moves
  /// whose every chunk ran (compactor::moves_completed_by_phases); an exception means no move ran,
  /// or that which did is not known. With a plan whose moves each lie in one phase (the pool's
  /// always do), a move not complete left its source as it was; a move split over phases and cut
  /// short may have overwritten part of its own source.
  virtual ExecutionResult execute(const compactor::ChunkPlan& plan, std::size_t moves) = 0;

  /// Runs the planner's moves with memmove semantics, as execute() runs a plan (a move's addresses
  /// are segment_bases[segment] plus its offsets; ExecutionResult::move_completed indexes `moves`).
  /// `scratch` is storage for a chunk plan that the caller keeps across calls. The default makes
  /// the chunk plan on the host and calls execute(); the CUDA device makes a slide's chunks on the
  /// GPU instead, from the moves alone.
  ///
  /// `meanwhile` (may be empty) is called once, on this thread, while the device works: after the
  /// moves are queued and before the wait for them. A device that moves synchronously (the default)
  /// calls it after the moves. The pool updates its bookkeeping there, ahead of the result. It is
  /// not called if queueing fails; it must not throw and must not call this device (whose lock it
  /// runs under, as the device's buffers are in use).
  ///
  /// `threads` (may be null) are the caller's, lent for the host's share of the call before the
  /// moves are queued (the CUDA device stages a slide's moves with them); a device may ignore them.
  virtual ExecutionResult execute_moves(gsl::span<const compactor::Move> moves,
                                        gsl::span<const std::uint64_t> segment_bases, compactor::ChunkPlan& scratch,
                                        const std::function<void()>& meanwhile, const HostThreads* threads);

  /// Appends the next part of a plan to `moves`; returns whether more parts may follow.
  using PlanMore = std::function<bool(std::vector<compactor::Move>& moves)>;
  /// execute_moves for moves planned in parts while the device runs the parts planned before:
  /// calls plan_more until it returns false. A part may run before the next is planned, and then
  /// only after the parts before it have completed, so every prefix of the parts must be
  /// executable alone (the prefixes of a compactor::FullPlanner plan are). Then calls `meanwhile`
  /// and waits as execute_moves does; the result indexes all of `moves`. The default plans every
  /// part, then calls execute_moves; the CUDA device queues each part as soon as it is planned.
  /// A part that cannot run once earlier parts have (a failure while it is prepared or queued) ends
  /// the execution with a result, not an exception: plan_more is still called until it returns
  /// false, no later part runs, and move_completed marks the moves of the parts that ran (and of a
  /// part's phases that ran before one failed to start). An exception propagates only when no move
  /// can have run, or when it is not known which did (the CUDA device: a sticky error, which loses
  /// the context anyway); plan_more must not throw (the pool's does not: it stops planning
  /// instead, once its layout is whole). plan_more must not grow `moves` past the capacity it has
  /// at the call (the pool reserves a move a live block): the devices reserve their report of a
  /// failed part for that many moves before the first part runs, so that the report needs no host
  /// memory, which may be what ran out.
  virtual ExecutionResult execute_moves_in_parts(std::vector<compactor::Move>& moves,
                                                 gsl::span<const std::uint64_t> segment_bases,
                                                 compactor::ChunkPlan& scratch, const PlanMore& plan_more,
                                                 const std::function<void()>& meanwhile);
  /// For a caller that stages a slide's moves itself (the pool's write_slide) as
  /// compactor::detail::SlideMove records, sparing the device a pass over the moves: the chunk
  /// size their first_chunk counts in over the whole plan; 0 (the default) when the device stages
  /// moves its own way.
  virtual std::uint32_t slide_chunk_bytes() const noexcept { return 0; }
  /// Host memory for such records, which the device uploads from fastest (pinned on the CUDA
  /// device); the caller's until release_staging. Throws std::bad_alloc or device_error when there
  /// is none; only for a device whose slide_chunk_bytes() is not 0 (the default throws).
  virtual void* obtain_staging(std::size_t bytes);
  virtual void release_staging(void* memory) noexcept;
  /// Takes now what executing a slide of up to `moves` moves of `bytes` in all would take on its
  /// first run (Pool::prepare_compaction): memory the device keeps for executions (the CUDA
  /// device: the device memory that a slide's moves, chunks and flags go to, and, unless
  /// `caller_stages` (the caller stages the moves itself: slide_chunk_bytes), the pinned memory
  /// they are uploaded from) and anything it loads on first use (the CUDA device: its kernels).
  /// A later execution that needs more still grows it. Throws device_error or std::bad_alloc when
  /// it cannot be had; what the device held before is kept. The default does nothing.
  virtual void reserve_moves(std::size_t moves, std::uint64_t bytes, bool caller_stages);
  /// Whether the device has work queued behind the part it is running: then a part given now
  /// would only wait, and the caller may hold back what is written and give it later, as one
  /// larger part (fewer launches, each with its own tail). Once it says no, it says no until the
  /// caller gives another part (what has run cannot run again): a caller may stop asking. Must not
  /// throw.
  using QueuedAhead = std::function<bool()>;
  /// How much of a plan that other threads write into `room` is written: blocks until more moves
  /// are than at the last return (or the plan is whole), returns how many are (a prefix of room),
  /// and sets `final` once that is the whole plan. `ahead` is the device's QueuedAhead. Must not
  /// throw. The call that sets `final` may give no more than the one before it: a caller may give
  /// every move, then write its own bookkeeping while the device moves, before it says final.
  using MovesWritten = std::function<std::size_t(bool& final, const QueuedAhead& ahead)>;
  /// A QueuedAhead for a device that never has work queued (each part runs before the next is
  /// asked), or for a caller that wants the rest of a plan at once.
  static const QueuedAhead& nothing_ahead() {
    static const QueuedAhead none = [] { return false; };
    return none;
  }
  /// execute_moves_in_parts for a plan that the caller's threads write into `room` in address
  /// order while the device runs the prefix written before (the pool's shared walk of a slide):
  /// each prefix that `written` reports is queued as a part, behind the parts before it. The same
  /// rules hold: every prefix must be executable alone; a part that cannot run once earlier parts
  /// have ends the execution with a result (written is still called until final); the result
  /// indexes the whole plan. `threads` (may be null) are lent as execute_moves's are, but only
  /// once `written` has set final: until then they write the plan. `staged` (may be null): the
  /// moves written are also there, one record each in the form slide_chunk_bytes() describes, in
  /// memory from obtain_staging, and form a slide (the caller vouches for it: nothing checks);
  /// the device may rewrite their first_chunk. The default waits for the whole plan, then calls
  /// execute_moves; the host and CUDA devices run each part as it comes.
  virtual ExecutionResult execute_moves_as_written(gsl::span<const compactor::Move> room,
                                                   gsl::span<const std::uint64_t> segment_bases,
                                                   compactor::ChunkPlan& scratch, const MovesWritten& written,
                                                   const std::function<void()>& meanwhile, const HostThreads* threads,
                                                   compactor::detail::SlideMove* staged);

 protected:
  /// For a device that runs the parts of execute_moves_as_written as they come: the plan written
  /// so far, as a prefix of `room`; clears `more` once it is whole. `ahead`: the device's QueuedAhead.
  static gsl::span<const compactor::Move> written_prefix(gsl::span<const compactor::Move> room,
                                                          const MovesWritten& written, bool& more,
                                                          const QueuedAhead& ahead = nothing_ahead()) {
    bool final = false;
    const std::size_t count = written(final, ahead);
    more = !final;
    return room.first(count);
  }

 public:

  // Stream-ordered uses. The defaults suit a device whose every call completes before it returns
  // (host, virtual): there is never work left to wait for. The CUDA device records events.

  /// Records where the work queued so far on `stream` ends.
  virtual UseToken record_use_end(Stream) { return 0; }
  /// Makes the next execute() wait (on the device) for the token's work.
  virtual void order_after(UseToken) {}
  /// Blocks the host until the token's work has finished.
  virtual void host_wait(UseToken) {}
  virtual bool use_ended(UseToken) { return true; }
  virtual void forget(UseToken) noexcept {}

  virtual void synchronize() {}
  virtual DeviceMemoryInfo memory_info() = 0;
  /// True when device memory can be read by the host directly (host and virtual devices).
  virtual bool host_addressable() const noexcept { return false; }
};

/// Which device make_device() returns.
enum class DeviceChoice {
  automatic,  ///< CUDA when a GPU is present, else host.
  cuda,       ///< CUDA or throw device_error.
  host,
  virtual_memory,
};

std::shared_ptr<Device> make_device(DeviceChoice choice = DeviceChoice::automatic);
std::shared_ptr<Device> make_virtual_device(std::uint64_t capacity_bytes = 1ull << 50);
/// The CUDA device `ordinal`; throws device_error when there is no usable GPU.
std::shared_ptr<Device> make_cuda_device(int ordinal = 0);
/// True when a CUDA GPU can be used (a driver and at least one device).
bool cuda_available() noexcept;

}  // namespace vramkit
