#pragma once
// Pool: device regions (segments), each sub-allocated by a heap, plus the handle table that makes
// every block movable, plus a device. Allocate, free, pin, read/write, compact, grow and shrink.
// Thread-safe: one lock guards the bookkeeping; host-device copies run outside it, pinned.
//
// Invariants (check_invariants() verifies them; tests call it):
//  - every live slot names an allocated heap block of its segment whose tag is that slot, and
//    every allocated heap block is named by exactly one live slot;
//  - used_bytes == sum of live slots' block bytes; pinned_allocations == live slots with pins > 0;
//  - a slot with pins > 0, or of kind arena, is never moved.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include <gsl/span>

#include <vramkit/compaction.hpp>
#include <vramkit/detail/default_init_allocator.hpp>
#include <vramkit/compactor/plan.hpp>
#include <vramkit/detail/spin_mutex.hpp>
#include <vramkit/device.hpp>
#include <vramkit/heap.hpp>
#include <vramkit/errors.hpp>
#include <vramkit/handle.hpp>
#include <vramkit/statistics.hpp>

namespace vramkit {

/// The largest alignment a pool block may ask for (segments are based at multiples of it).
inline constexpr std::uint64_t max_block_alignment = std::uint64_t{2} << 20;

class BlockCache;
class HandleTable;
class Heap;
class WorkerTeam;

/// automatic: in parts when the live blocks average at least 64 KiB; with smaller blocks the host's
/// planning, not the GPU, decides how long a compaction takes (docs/concepts.md, "Compaction and
/// streams"). Whatever the mean, a full compaction without a byte budget in which every block may
/// move, on a segment of PoolOptions::parallel_update_min_blocks live blocks or more, is written by
/// the compaction team while the device moves each prefix written (in parts), unless `never`.
enum class CompactionParts { automatic, always, never };

struct PoolOptions {
  std::uint64_t capacity_bytes = 0;      ///< The first segment's size. 0: use capacity_fraction.
  double capacity_fraction = 0;          ///< Of the device's free memory, when capacity_bytes is 0.
  std::uint64_t max_capacity_bytes = 0;  ///< Growth limit over all segments; 0: no growth.
  std::uint64_t segment_bytes = 0;       ///< Minimum size of a segment added by growth; 0: the first's size.
  std::uint64_t granularity = 256;       ///< Block sizes and offsets are multiples (power of two, >= 16).
  bool compact_on_failure = true;        ///< Try a minimal compaction before growing or failing.
  /// Whether a full compaction walks the heaps and plans its moves in parts, the device moving each
  /// part while the host plans the next, or plans everything first (docs/concepts.md).
  CompactionParts compaction_parts = CompactionParts::automatic;
  std::uint64_t guard_bytes = 0;         ///< Debug: a margin after every block (see guard margins).
  /// The first block freed since the last allocation is kept for the next request, which gets it
  /// back if it is of exactly the same size, skipping the heap's merge and split; a request of
  /// another size returns it to the heap first, as do compaction, statistics and the memory map. Only blocks of at most this
  /// many bytes are kept; automatic_cache: any size; 0: off.
  std::uint64_t free_cache_bytes = automatic_cache;
  static constexpr std::uint64_t automatic_cache = ~std::uint64_t{0};
  /// Threads (the calling one included) that share a compaction's update of heaps and slots once
  /// a segment has at least parallel_update_min_blocks live blocks; the pool starts them then, and
  /// they sleep between compactions. 0: automatic (the CPUs that the thread compacting first may
  /// run on, by its affinity mask, at most 8); 1: the calling thread alone; at most
  /// Heap::max_rebuild_parts.
  unsigned compaction_threads = 0;
  static constexpr std::size_t parallel_update_min_blocks = 16384;
};

/// One block of the memory map.
enum class BlockState { free, live, pinned, arena };
const char* to_string(BlockState state);

struct BlockInfo {
  std::uint32_t segment = 0;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;
  BlockState state = BlockState::free;
  std::uint32_t slot = 0;  ///< For live, pinned and arena blocks.
};

struct SegmentInfo {
  std::uint32_t segment = 0;
  std::uint64_t address = 0;
  std::uint64_t bytes = 0;
};

class Pool {
 public:
  /// Throws invalid_argument for a capacity of 0 (and no fraction), a fraction outside (0, 1], a
  /// granularity that is not a power of two >= 16, or a maximum below the capacity.
  explicit Pool(PoolOptions options, std::shared_ptr<Device> device = make_device());
  ~Pool();
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  /// A block of `bytes` (> 0) aligned to `alignment` (a power of two up to 2 MiB). On failure: a minimal
  /// compaction (if enabled), then growth (if allowed), then out_of_memory carrying statistics.
  Handle allocate(std::uint64_t bytes, std::uint64_t alignment = 256);
  /// Like allocate, but the block is pinned for its whole life (arenas, raw-pointer users).
  Handle allocate_pinned(std::uint64_t bytes, std::uint64_t alignment = 256);
  /// Throws invalid_handle for a stale/foreign/empty handle, state_error if the buffer is pinned.
  /// Waits for stream uses recorded at unpin before the memory can be reused.
  void free(Handle handle);
  /// The destructor path; never throws. Frees a valid handle and returns true. A buffer still
  /// pinned is freed when its last pin ends (a DeviceBuffer may die before its Pinned guard). With a
  /// stream, the memory is not reused before the work queued there so far has finished (the host
  /// waits for it). Returns false for a stale, foreign or empty handle.
  bool release(Handle handle, Stream stream = nullptr) noexcept;

  bool valid(Handle handle) const noexcept;
  /// Whether `handle` was issued by this pool (live or not): its table id is this pool's. O(1).
  bool owns(Handle handle) const noexcept;
  std::uint64_t size(Handle handle) const;

  /// The buffer's device address, valid until the matching unpin. Pins nest.
  std::uint64_t pin(Handle handle);
  /// Ends one pin. With a stream, the buffer is not moved (nor its memory reused) until the work
  /// queued on that stream so far has finished. Throws state_error if the buffer is not pinned.
  void unpin(Handle handle, Stream stream = nullptr);
  /// unpin for destructors: never throws; returns false on misuse.
  bool unpin_noexcept(Handle handle, Stream stream = nullptr) noexcept;
  /// The device address without pinning: valid only until the next compaction.
  std::uint64_t address(Handle handle) const;

  /// Synchronous copies between host memory and the buffer at byte `offset`; range-checked.
  void write(Handle handle, gsl::span<const std::byte> data, std::uint64_t offset = 0, Stream stream = nullptr);
  void read(Handle handle, gsl::span<std::byte> data, std::uint64_t offset = 0, Stream stream = nullptr) const;
  void fill(Handle handle, std::byte value, Stream stream = nullptr);

  /// Moves live blocks (DESIGN.md, "Relocation rules"). The pool keeps the host buffers of a
  /// compaction for the next one: about 130 bytes per live block, held from the first compaction on.
  CompactionReport compact(const CompactOptions& options = {});
  /// Takes now what a full compaction of the blocks live now takes the first time, so that the
  /// pool's first compact() costs about what later ones do: the compaction's host buffers, each
  /// page written once (about 150 bytes a live block, which compact() would hold from then on
  /// anyway), the compaction team's threads, and the device's staging and scratch memory (the
  /// CUDA device: pinned staging and device memory for the moves and chunks, and its kernels
  /// loaded). Call it once the pool holds a batch's buffers, before the first compact() between
  /// batches; a compaction of more blocks still takes what more it needs. Moves nothing and
  /// changes no buffer. Throws std::bad_alloc or device_error when memory cannot be had; what was
  /// taken before is kept for the next compaction, and the pool is otherwise unchanged.
  void prepare_compaction();

  PoolStatistics statistics() const;
  std::vector<BlockInfo> block_map() const;
  std::vector<SegmentInfo> segments() const;
  /// The largest block this pool could ever hold (its largest possible segment): the first
  /// segment, or all the growth limit leaves beside it, whichever is larger.
  std::uint64_t largest_possible_block() const;
  Device& device() const { return *device_; }
  const PoolOptions& options() const { return options_; }

  /// Guard margins: checks every live block's margin; throws corruption_error for the first bad one.
  void check_guards() const;
  /// Throws std::logic_error naming the first broken invariant (heap and pool). O(n).
  void check_invariants() const;

 private:
  struct Segment;
  struct PendingUse {
    std::uint32_t slot;
    UseToken token;
  };

  /// What the *_locked functions take to show that the caller holds mutex_.
  using Lock = std::lock_guard<detail::SpinMutex>;

  Handle allocate_locked(std::uint64_t bytes, std::uint64_t alignment, bool pinned, const Lock& lock);
  bool try_place(std::uint32_t slot, std::uint64_t block_bytes, std::uint64_t alignment);
  /// Places a slot that try_place could not: compaction on failure, then growth; throws
  /// out_of_memory (the slot released) when neither makes room.
  void place_after_failure(std::uint32_t slot, std::uint64_t bytes, std::uint64_t block_bytes,
                           std::uint64_t alignment);
  /// Frees every cached block in its heap. Logically const: the pool's contents do not change.
  void drain_cache() const;
  bool grow(std::uint64_t block_bytes);
  void add_segment(std::uint64_t bytes);
  void free_locked(std::uint32_t slot, const Lock& lock);
  /// Waits for, then forgets, the stream uses recorded on a slot being freed.
  void finish_pending_uses(std::uint32_t slot);
  /// Records where the work queued on `stream` so far ends, as a use of the slot. First forgets
  /// the recorded uses whose work has ended once their number has doubled since the last time, so
  /// that a buffer pinned and unpinned on a stream batch after batch, with no free or compaction
  /// between, keeps as many uses as are in flight, not one a batch (amortised: at most two
  /// queries a recorded use).
  void record_use(std::uint32_t slot, Stream stream);
  /// After uses are removed otherwise (a free, a compaction): the next sweep comes when their
  /// number has doubled from what is left.
  void lower_pending_uses_sweep() noexcept;
  CompactionReport compact_locked(const CompactOptions& options);
  /// Live blocks of each segment in address order, as the planner sees them.
  /// Sized without a pass of zeroes (the parts of a shared walk fill them: plan_slide).
  using LiveBlocks = std::vector<compactor::LiveBlock, detail::DefaultInitAllocator<compactor::LiveBlock>>;
  using Layout = std::vector<LiveBlocks>;
  void compact_full(std::uint64_t max_bytes_moved, CompactionReport& report);
  void plan_slide(std::size_t segment, std::uint64_t& budget, CompactionReport& report);
  void note_slide_moved(std::size_t segment, std::size_t stay, std::uint64_t staying);
  void layout_from_slide(gsl::span<const compactor::Move> moves);
  bool writes_slide(std::uint64_t budget, std::size_t largest_segment_blocks) const;
  void write_slide(CompactionReport& report);
  std::uint32_t slide_staging_chunk_bytes(std::size_t live_blocks) const;
  bool take_slide_staging(std::size_t moves);
  /// Starts the compaction team (compaction_threads) for a segment of `blocks` live blocks, unless
  /// there is one, it is not worth it, or threads cannot be had. Returns whether a team is there.
  bool start_team(std::size_t blocks);
  /// Executes a whole plan, or one that plan_more makes in parts into `moves` while the device
  /// runs the parts before, and applies the completed moves (run_moves, which also runs a plan
  /// that the team writes into `whole` while the device runs what is written: write_slide).
  void apply_moves(gsl::span<const compactor::Move> moves, const Layout& layout, CompactionReport& report);
  void apply_moves(std::vector<compactor::Move>& moves, const Device::PlanMore& plan_more, const Layout& layout,
                   CompactionReport& report);
  void run_moves(gsl::span<const compactor::Move> whole, std::vector<compactor::Move>* growing,
                 const Device::PlanMore* plan_more, const Device::MovesWritten* written, bool in_segments,
                 const Layout& layout, CompactionReport& report);
  void update_heaps(gsl::span<const compactor::Move> moves, const ExecutionResult& result, const Layout& layout,
                    CompactionReport& report);
  void reset_moved_slots(gsl::span<const compactor::Move> moves);
  void reserve_update(gsl::span<const compactor::Move> moves);
  /// The parts an update of a segment's `blocks` blocks is split into: 1 without a team.
  unsigned update_parts(std::size_t blocks) const;
  /// Runs task(k) for k < parts, on the team when parts > 1 (update_parts).
  template <class Task>
  void run_parts(unsigned parts, Task&& task);
  bool merge_placements(gsl::span<const compactor::Move> moves, const ExecutionResult& result,
                        const Layout& layout, CompactionReport& report);
  void rebuild_heap(std::size_t segment, bool sorted, std::size_t slots_from, bool packed, CompactionReport& report);
  void check_guard_locked(std::uint32_t slot) const;
  void write_guard(std::uint32_t slot);
  PoolStatistics statistics_locked() const;
  std::uint64_t slot_address(std::uint32_t slot) const;
  void live_layout(Layout& layout) const;
  std::size_t clear_layout(Layout& layout) const;
  bool walk_live_blocks(std::size_t segment, BlockId& next, std::size_t limit,
                        LiveBlocks& blocks) const;
  std::vector<compactor::SegmentLayout> layouts(const Layout& blocks) const;
  void release_trailing_segments(std::uint64_t max_bytes_moved, CompactionReport& report);
  [[noreturn]] void throw_out_of_memory(std::uint64_t bytes, std::uint64_t alignment) const;

  PoolOptions options_;
  std::shared_ptr<Device> device_;
  std::uint64_t first_segment_bytes_ = 0;
  std::uint64_t largest_block_ = 0;  ///< largest_possible_block(), fixed at construction.
  mutable detail::SpinMutex mutex_;  ///< Guards everything below; see detail/spin_mutex.hpp.
  std::unique_ptr<HandleTable> table_;
  std::unique_ptr<BlockCache> cache_;  ///< Emptied in const methods too (drain_cache).
  std::vector<std::unique_ptr<Segment>> segments_;
  std::vector<PendingUse> pending_uses_;
  std::size_t pending_uses_sweep_at_ = 64;  ///< record_use forgets ended uses when there are this many.
  struct CompactionScratch;
  std::unique_ptr<CompactionScratch> compaction_scratch_;  ///< Created by the first compaction.
  /// Shares large updates (compaction_threads); started by the first that needs it, if it can be.
  std::unique_ptr<WorkerTeam> team_;
  // Counters behind PoolStatistics.
  std::uint64_t reserved_ = 0, used_ = 0, requested_ = 0, pinned_ = 0;
  /// Live slots whose alignment is above the granularity. With it and pinned_ at 0, compaction's
  /// walk takes every block as movable at the granularity without reading its slot.
  std::uint64_t over_aligned_ = 0;
  std::uint64_t peak_used_ = 0, peak_reserved_ = 0;
  std::uint64_t requests_ = 0, failures_ = 0;
  std::uint64_t compactions_ = 0, blocks_moved_ = 0, bytes_moved_ = 0;
  std::chrono::duration<double> compaction_time_{0};
};

}  // namespace vramkit
