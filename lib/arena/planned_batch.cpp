// PlannedBatch and the pool-side fit check. Construction copies the plan and the solution (O(buffers));
// every view is O(1) (a map lookup by name: O(log buffers)).
#include <vramkit/planned_batch.hpp>

#include <algorithm>

#include <vramkit/detail/bits.hpp>
#include <vramkit/detail/message.hpp>
#include <vramkit/units.hpp>

namespace vramkit {

std::uint64_t largest_region_available(const Pool& pool, std::uint64_t alignment) {
  if (!detail::is_power_of_two(alignment) || alignment > max_block_alignment) {
    throw invalid_argument(detail::message("region alignment ", alignment, " is not a power of two up to ",
                                           max_block_alignment));
  }
  const PoolOptions& options = pool.options();
  const PoolStatistics statistics = pool.statistics();
  // A free block starts at a multiple of the granularity: an aligned start skips at most this much.
  const std::uint64_t skip = alignment > options.granularity ? alignment - options.granularity : 0;
  std::uint64_t largest = statistics.largest_free_block > skip ? statistics.largest_free_block - skip : 0;
  if (options.max_capacity_bytes > statistics.reserved_bytes) {
    // Growth adds one segment of up to the room left (rounded down to the granularity), if the device
    // has that much free.
    std::uint64_t room = options.max_capacity_bytes - statistics.reserved_bytes;
    room = std::min(room, pool.device().memory_info().free_bytes) & ~(options.granularity - 1);
    largest = std::max(largest, room);
  }
  // A block also holds its guard margin.
  return largest > options.guard_bytes ? largest - options.guard_bytes : 0;
}

FitReport check_fit(const PlanSolution& solution, const Pool& pool) {
  return check_fit(solution, largest_region_available(pool, solution.region_alignment));
}

PlannedBatch::PlannedBatch(Pool& pool, const MemoryPlan& plan, const PlanSolution& solution,
                           PlannedBatchOptions options)
    : pool_(&pool), plan_(plan), solution_(solution), options_(options) {
  const auto& declared = plan_.buffers();
  bool same = solution_.buffers.size() == declared.size() && solution_.stages.size() == plan_.stages().size();
  for (std::size_t index = 0; same && index < declared.size(); ++index) {
    same = solution_.buffers[index].name == declared[index].name &&
           solution_.buffers[index].reserved_bytes == declared[index].reserved_bytes;
  }
  if (!same) {
    throw invalid_argument(detail::message("the solution (", solution_.buffers.size(), " buffers, ",
                                           solution_.stages.size(), " stages) is not the plan's (",
                                           declared.size(), " buffers, ", plan_.stages().size(), " stages)"));
  }
  if (solution_.peak_bytes != 0) {
    region_ =
        pool.allocate_pinned(solution_.peak_bytes, std::max<std::uint64_t>(solution_.region_alignment, 1));
    try {
      address_ = pool.address(region_);
    } catch (...) {  // no destructor runs for a constructor that throws: give the block back here
      pool.release(region_);
      throw;
    }
  }
}

PlannedBatch::~PlannedBatch() {
  release();
}

void PlannedBatch::release() noexcept {
  if (released_) return;
  if (!region_.empty()) pool_->release(region_);
  released_ = true;
}

void PlannedBatch::enter_stage(std::string_view stage_name) {
  stage_ = plan_.stage_index(stage_name);
}

void PlannedBatch::enter_stage(std::size_t stage) {
  if (stage >= plan_.stages().size()) {
    throw invalid_argument(detail::message("stage ", stage, " is out of range: the plan has ",
                                           plan_.stages().size(), " stages"));
  }
  stage_ = stage;
}

std::uint64_t PlannedBatch::checked_offset(std::size_t index, std::size_t element_bytes,
                                           std::size_t element_alignment) const {
  const auto& declared = plan_.buffers();
  if (index >= declared.size()) {
    throw invalid_argument(
        detail::message("buffer ", index, " is out of range: the plan has ", declared.size(), " buffers"));
  }
  const PlannedBuffer& buffer = declared[index];
  if (released_) {
    throw state_error(detail::message("buffer '", buffer.name, "' asked of a released batch"));
  }
  if (buffer.bytes % element_bytes != 0) {
    throw invalid_argument(detail::message("buffer '", buffer.name, "' of ", buffer.bytes,
                                           " bytes is not a whole number of ", element_bytes,
                                           "-byte elements"));
  }
  if (buffer.alignment % element_alignment != 0) {
    throw invalid_argument(detail::message("buffer '", buffer.name, "' is aligned to ", buffer.alignment,
                                           " bytes; its elements need ", element_alignment));
  }
  if (options_.check_lifetimes && !solution_.live_in(index, stage_)) {
    const auto& stages = plan_.stages();
    throw state_error(detail::message("buffer '", buffer.name, "' used in stage '", stages[stage_], "' (",
                                      stage_, "); it is declared live in stages '",
                                      stages[buffer.first_stage], "'..'", stages[buffer.last_stage], "' (",
                                      buffer.first_stage, "..", buffer.last_stage, ")"));
  }
  return solution_.buffers[index].offset;
}

std::uint64_t PlannedBatch::image_row_values(std::size_t index, std::size_t value_bytes) const {
  const PlannedBuffer& buffer = plan_.buffers()[index];
  if (!buffer.image) {
    throw invalid_argument(detail::message("buffer '", buffer.name, "' was not declared with add_image"));
  }
  const ImageLayout& layout = *buffer.image;
  std::uint64_t values = 0;
  if (value_bytes == layout.channels * layout.element_bytes) {
    values = layout.width;
  } else if (value_bytes == layout.element_bytes) {
    values = layout.width * layout.channels;
  } else {
    throw invalid_argument(detail::message("image '", buffer.name, "' has ", layout.channels, " channel(s) of ",
                                           layout.element_bytes, " bytes; a pixel type of ", value_bytes,
                                           " bytes matches neither a pixel nor a channel"));
  }
  // An ArenaImage counts rows and values a row in 32 bits.
  constexpr std::uint64_t most = 0xFFFFFFFFu;
  if (values > most || layout.height > most) {
    throw invalid_argument(detail::message("image '", buffer.name, "' of ", values, " values a row x ", layout.height,
                                           " rows: an image view holds at most ", most, " of each"));
  }
  return values;
}

}  // namespace vramkit
