// ScopedArena: bump allocation in one pinned region, and the LIFO bookkeeping of nested arenas.
// Every operation is O(1) except the ones that look at children (O(live children), a handful).
#include <vramkit/scoped_arena.hpp>

#include <algorithm>
#include <limits>

#include <vramkit/detail/bits.hpp>
#include <vramkit/detail/message.hpp>
#include <vramkit/units.hpp>

namespace vramkit {
namespace {

using detail::is_power_of_two;

std::string quote_name(const std::string& name) {
  return "'" + name + "'";
}

}  // namespace

ScopedArena::ScopedArena(Pool& pool, std::uint64_t bytes, std::string name, std::uint64_t alignment)
    : pool_(&pool), capacity_(bytes), name_(std::move(name)) {
  region_ = pool.allocate_pinned(bytes, alignment);
  try {
    root_address_ = pool.address(region_);
  } catch (...) {  // no destructor runs for a constructor that throws: give the block back here
    pool.release(region_);
    throw;
  }
}

ScopedArena::ScopedArena(ScopedArena& parent, std::uint64_t bytes, std::string name, std::uint64_t alignment)
    : pool_(parent.pool_),
      parent_(&parent),
      region_(parent.region_),
      root_address_(parent.root_address_),
      capacity_(bytes),
      name_(std::move(name)) {
  parent.check_usable("carve a child arena");
  if (bytes == 0) throw invalid_argument(detail::message("child arena ", quote_name(name_), " of 0 bytes"));
  const std::uint64_t used_before = parent.used_;
  base_offset_ = parent.bump(bytes, alignment, "child arena");
  parent.children_.push_back({this, used_before, true});
}

ScopedArena::~ScopedArena() {
  if (released_ || !orphaned_by_.empty()) return;
  // Children still alive lose their memory with ours: make every later call on them an error.
  auto orphan = [this](auto& self, ScopedArena& arena, const std::string& by) -> void {
    for (Child& child : arena.children_) {
      if (!child.alive) continue;
      child.arena->orphaned_by_ = by;
      child.arena->parent_ = nullptr;
      self(self, *child.arena, by);
    }
  };
  std::string live;
  for (const Child& child : children_) {
    if (child.alive) live += (live.empty() ? "" : ", ") + quote_name(child.arena->name_);
  }
  orphan(orphan, *this, name_);
  if (parent_ != nullptr) {
    const bool on_top = parent_->children_.back().arena == this;
    try {
      if (!live.empty()) {
        parent_->misuse_.push_back(
            detail::message("arena ", quote_name(name_), " was destroyed while its children ", live, " lived"));
      }
      if (!on_top) {
        parent_->misuse_.push_back(detail::message(
            "child arena ", quote_name(name_), " was destroyed out of order: ",
            quote_name(parent_->children_.back().arena->name_), ", created after it, still lived"));
      }
    } catch (...) {  // recording needs memory; a destructor never throws
    }
  }
  give_back();
}

std::uint64_t ScopedArena::at_least(std::uint64_t alignment, std::uint64_t minimum) {
  if (!is_power_of_two(alignment)) {
    throw invalid_argument(detail::message("alignment ", alignment, " is not a power of two"));
  }
  return std::max(alignment, minimum);
}

std::uint64_t ScopedArena::checked_bytes(std::size_t count, std::size_t element_bytes) {
  if (count > std::numeric_limits<std::uint64_t>::max() / element_bytes) {
    throw invalid_argument(detail::message("arena buffer of ", count, " elements of ", element_bytes,
                                           " bytes overflows 64-bit byte counts"));
  }
  return std::uint64_t{count} * element_bytes;
}

std::uint64_t ScopedArena::image_pitch(std::uint32_t width, std::uint32_t height, std::size_t element_bytes,
                                       std::uint64_t row_alignment) {
  if (width == 0 || height == 0) {
    throw invalid_argument(detail::message("image of ", width, " x ", height, " pixels: both must be > 0"));
  }
  if (!is_power_of_two(row_alignment)) {
    throw invalid_argument(detail::message("row alignment ", row_alignment, " is not a power of two"));
  }
  // width x element_bytes < 2^32 x 2^32; rounding up cannot overflow for any sane element size.
  const std::uint64_t pitch =
      (std::uint64_t{width} * element_bytes + row_alignment - 1) & ~(row_alignment - 1);
  if (pitch > std::numeric_limits<std::uint64_t>::max() / height) {
    throw invalid_argument(
        detail::message("image of ", width, " x ", height, " overflows 64-bit byte counts"));
  }
  return pitch;
}

std::uint64_t ScopedArena::allocate_bytes(std::uint64_t bytes, std::uint64_t alignment) {
  return take(bytes, alignment, "block");
}

std::uint64_t ScopedArena::take(std::uint64_t bytes, std::uint64_t alignment, const char* what) {
  check_usable("allocate");
  if (!children_.empty()) {
    throw state_error(detail::message("arena ", quote_name(name_), " cannot hand out a ", what, ": child arena ",
                                      quote_name(children_.back().arena->name_),
                                      " holds its top; allocate from the child or release it first"));
  }
  return bump(bytes, alignment, what);
}

std::uint64_t ScopedArena::bump(std::uint64_t bytes, std::uint64_t alignment, const char* what) {
  if (!is_power_of_two(alignment)) {
    throw invalid_argument(detail::message("alignment ", alignment, " is not a power of two"));
  }
  // Align the absolute address, so a child or a view is aligned whatever its parent's offset.
  const std::uint64_t base = root_address_ + base_offset_;
  const std::uint64_t top = base + used_;
  const std::uint64_t padding = (alignment - (top & (alignment - 1))) & (alignment - 1);
  const std::uint64_t left = capacity_ - used_;
  if (padding > left || bytes > left - padding) {
    throw arena_exhausted(detail::message(
        "arena ", quote_name(name_), " cannot hand out a ", what, " of ", format_bytes(bytes), " (", bytes,
        " bytes, alignment ", alignment, "): ", format_bytes(left), " (", left, " bytes) left of ",
        format_bytes(capacity_), ", ", padding, " bytes of it needed for alignment"));
  }
  const std::uint64_t start = used_ + padding;
  used_ = start + bytes;
  high_water_ = std::max(high_water_, used_);
  ++allocations_;
  return base_offset_ + start;
}

void ScopedArena::check_usable(const char* operation) const {
  if (!orphaned_by_.empty()) {
    throw state_error(detail::message("cannot ", operation, " in arena ", quote_name(name_), ": its parent ",
                                      quote_name(orphaned_by_),
                                      " was destroyed first (arenas are released in LIFO order), so its "
                                      "memory is gone"));
  }
  if (released_) {
    throw state_error(
        detail::message("cannot ", operation, " in arena ", quote_name(name_), ": it was released"));
  }
}

void ScopedArena::throw_recorded_misuse(const char* operation) {
  if (misuse_.empty()) return;
  std::string all;
  for (const std::string& entry : misuse_) all += (all.empty() ? "" : "; ") + entry;
  misuse_.clear();
  throw state_error(detail::message("arena ", quote_name(name_), " refuses ", operation,
                                    " once (nothing changed; call again to proceed) after misuse: ", all));
}

void ScopedArena::reset() {
  check_usable("reset");
  throw_recorded_misuse("reset");
  if (!children_.empty()) {
    throw state_error(detail::message("cannot reset arena ", quote_name(name_), ": child arena ",
                                      quote_name(children_.back().arena->name_), " still lives"));
  }
  used_ = 0;
  ++resets_;
}

void ScopedArena::release() {
  if (released_ && orphaned_by_.empty()) return;
  check_usable("release");
  throw_recorded_misuse("release");
  if (!children_.empty()) {
    throw state_error(detail::message("cannot release arena ", quote_name(name_), ": child arena ",
                                      quote_name(children_.back().arena->name_),
                                      " still lives; release it first"));
  }
  if (parent_ != nullptr && parent_->children_.back().arena != this) {
    throw state_error(detail::message("cannot release child arena ", quote_name(name_), " of ",
                                      quote_name(parent_->name_),
                                      " out of order: ", quote_name(parent_->children_.back().arena->name_),
                                      ", created after it, still lives; release arenas in reverse order"));
  }
  give_back();
}

void ScopedArena::child_gone(ScopedArena* child) noexcept {
  for (Child& entry : children_) {
    if (entry.arena == child) entry.alive = false;
  }
  // Invariant: children_ is empty or its newest entry is alive. Dead entries below a live one keep
  // their bytes until everything above them is gone.
  while (!children_.empty() && !children_.back().alive) {
    used_ = children_.back().used_before;
    children_.pop_back();
  }
}

void ScopedArena::give_back() noexcept {
  if (parent_ != nullptr) {
    parent_->child_gone(this);
  } else {
    pool_->release(region_);
  }
  released_ = true;
  used_ = 0;
}

ArenaStatistics ScopedArena::statistics() const noexcept {
  return {.capacity_bytes = capacity_,
          .used_bytes = used_,
          .high_water_bytes = high_water_,
          .allocations = allocations_,
          .resets = resets_,
          .live_children = static_cast<std::size_t>(std::count_if(
              children_.begin(), children_.end(), [](const Child& child) { return child.alive; }))};
}

}  // namespace vramkit
