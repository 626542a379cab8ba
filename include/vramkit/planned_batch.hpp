#pragma once
// PlannedBatch: runs a solved MemoryPlan in one pinned pool region. check_fit(solution, pool) says
// before any work whether the pool can provide that region and which stage is short by how much;
// a PlannedBatch then takes the region (solution.peak_bytes, based at solution.region_alignment),
// hands out each declared buffer at base + its solved offset, and gives the region back at scope end.
//
//   const PlanSolution solution = solve(plan);
//   if (const FitReport fit = check_fit(solution, pool); !fit.fits) throw out_of_memory(to_text(fit));
//   PlannedBatch batch(pool, plan, solution);
//   batch.enter_stage("blur");
//   ArenaBuffer<float> gray = batch.buffer<float>("gray");
//
// Lifetime checks (on by default in debug builds, PlannedBatchOptions::check_lifetimes): asking for
// a buffer in a stage outside its declared [first, last] range throws state_error naming the buffer,
// the stage and the range. The check runs when a view is obtained; a view kept past its last stage is
// not seen, so take views per stage.
//
// Invariants: the region is one pool block of kind arena (never moved) of at least peak_bytes whose
// address is a multiple of region_alignment; buffers live in a common stage never share a byte (the
// solution's invariant, carried over by base + offset). Not thread-safe; the pool beneath is.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <vramkit/arena_buffer.hpp>
#include <vramkit/errors.hpp>
#include <vramkit/memory_plan.hpp>
#include <vramkit/pool.hpp>

namespace vramkit {

/// The largest single region `pool` could provide now, based at a multiple of `alignment`, without
/// moving anything: its largest free block less the most an aligned start can skip in it (alignment
/// - granularity, when the alignment is the larger), or the room growth still has (max_capacity_bytes
/// - reserved, at most the device's free memory; a new segment starts aligned), whichever is larger,
/// less the pool's guard margin. Compaction may find more; this does not count on it. Throws
/// invalid_argument for an alignment that is not a power of two or exceeds max_block_alignment.
std::uint64_t largest_region_available(const Pool& pool, std::uint64_t alignment = 1);

/// check_fit(solution, largest_region_available(pool, solution.region_alignment)): throws
/// invalid_argument when the solution's region alignment is past what a pool block may have.
FitReport check_fit(const PlanSolution& solution, const Pool& pool);

struct PlannedBatchOptions {
#ifdef NDEBUG
  bool check_lifetimes = false;
#else
  bool check_lifetimes = true;  ///< Debug builds: buffer()/image() outside a buffer's stages throw.
#endif
};

class PlannedBatch {
 public:
  /// Takes the region from `pool` (pinned for the batch's life). Throws invalid_argument when the
  /// solution is not the plan's, and what Pool::allocate_pinned throws (out_of_memory). The batch
  /// starts in the plan's first stage. Keeps its own copy of the plan and the solution.
  PlannedBatch(Pool& pool, const MemoryPlan& plan, const PlanSolution& solution,
               PlannedBatchOptions options = {});
  ~PlannedBatch();
  PlannedBatch(const PlannedBatch&) = delete;
  PlannedBatch& operator=(const PlannedBatch&) = delete;

  /// Moves to a stage (any order; a pipeline normally goes forward). Throws invalid_argument for an
  /// unknown name or an index out of range.
  void enter_stage(std::string_view stage_name);
  void enter_stage(std::size_t stage);
  std::size_t stage() const noexcept { return stage_; }
  const std::string& stage_name() const { return plan_.stages()[stage_]; }

  /// Buffer `name` (or index) as `bytes / sizeof(T)` elements of T. Throws invalid_argument for an
  /// unknown buffer, or when sizeof(T) does not divide its bytes or alignof(T) its alignment;
  /// state_error when lifetimes are checked and the buffer is not live in the current stage.
  template <class T>
  ArenaBuffer<T> buffer(std::string_view name) {
    return buffer<T>(plan_.buffer_index(name));
  }
  template <class T>
  ArenaBuffer<T> buffer(std::size_t index) {
    const std::uint64_t offset = checked_offset(index, sizeof(T), alignof(T));
    return ArenaBuffer<T>(*pool_, region_, address_, offset, plan_.buffers()[index].bytes / sizeof(T));
  }

  /// An image declared with MemoryPlan::add_image, with its recorded pitch. T is either one pixel
  /// (sizeof(T) == channels x element bytes: width pixels a row) or one channel (sizeof(T) == element
  /// bytes: width x channels values a row). Throws invalid_argument otherwise or for a plain buffer.
  template <class T>
  ArenaImage<T> image(std::string_view name) {
    const std::size_t index = plan_.buffer_index(name);
    const std::uint64_t offset = checked_offset(index, 1, alignof(T));
    const std::uint64_t row_values = image_row_values(index, sizeof(T));
    const ImageLayout& layout = *plan_.buffers()[index].image;
    return ArenaImage<T>(*pool_, region_, address_, offset, static_cast<std::uint32_t>(row_values),
                         static_cast<std::uint32_t>(layout.height), layout.pitch_bytes);
  }

  /// Gives the region back now; the destructor then does nothing. Views handed out become stale
  /// (their copies throw invalid_handle).
  void release() noexcept;
  bool released() const noexcept { return released_; }

  std::uint64_t address() const noexcept { return address_; }
  std::uint64_t region_bytes() const noexcept { return solution_.peak_bytes; }
  const MemoryPlan& plan() const noexcept { return plan_; }
  const PlanSolution& solution() const noexcept { return solution_; }
  const PlannedBatchOptions& options() const noexcept { return options_; }

 private:
  /// The buffer's offset in the region, after the checks buffer() documents.
  std::uint64_t checked_offset(std::size_t index, std::size_t element_bytes,
                               std::size_t element_alignment) const;
  std::uint64_t image_row_values(std::size_t index, std::size_t value_bytes) const;

  Pool* pool_;
  MemoryPlan plan_;
  PlanSolution solution_;
  PlannedBatchOptions options_;
  Handle region_{};
  std::uint64_t address_ = 0;
  std::size_t stage_ = 0;
  bool released_ = false;
};

}  // namespace vramkit
