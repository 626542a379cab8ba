#pragma once
// ScopedArena: one contiguous region, pinned for the arena's whole life, handed out by bump
// allocation and given back at scope end. For per-stage or per-batch scratch memory: an allocation
// costs an add and an align (no lock, no heap search), reset() rewinds it for the next batch, and
// the views it returns carry raw device pointers that stay valid because the compactor never moves
// an arena block (it plans around it like any pinned block).
//
//   ScopedArena frame(pool, 16_MiB, "frame");
//   ArenaBuffer<float> gray = frame.allocate<float>(1920 * 1080);
//   ArenaImage<std::uint8_t> mask = frame.image<std::uint8_t>(1920, 1080);
//   {
//     ScopedArena scratch(frame, 4_MiB, "blur scratch");   // nested: carved from frame's top
//     ...
//   }                                                      // scratch given back to frame
//   frame.reset();                                         // next batch reuses the same bytes
//
// Invariants: 0 <= used <= capacity; high_water >= used; every view handed out since the last
// reset lies in [base, base + used). A root arena owns one pool block of kind arena (bytes =
// capacity); a child owns [offset, offset + capacity) of its parent's region, at its parent's top.
//
// Nesting is a stack. While a parent has live children, its top belongs to them: the parent hands out
// further children only (a plain allocate() or reset() is a state_error). Children are given back in
// reverse order of creation (LIFO). Misuse is raised where it happens when it can be:
//  - release() of a child that is not its parent's newest live child, or of an arena with live
//    children, throws state_error and changes nothing;
//  - a destructor never throws: a child destroyed out of order is recorded in its parent (its bytes
//    come back once the children above it are gone), and the parent's next reset() or release()
//    throws state_error naming it (once; the call changes nothing and may be repeated);
//  - a parent destroyed while children live orphans them: their memory is gone, and every later
//    call on them (allocate, reset, release) throws state_error naming the parent.
//
// Not thread-safe: one arena belongs to one thread at a time (the pool beneath is thread-safe).
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include <vramkit/arena_buffer.hpp>
#include <vramkit/errors.hpp>
#include <vramkit/pool.hpp>

namespace vramkit {

struct ArenaStatistics {
  std::uint64_t capacity_bytes = 0;
  std::uint64_t used_bytes = 0;        ///< Bump pointer: bytes from the base to the end of the last view.
  std::uint64_t high_water_bytes = 0;  ///< Highest used_bytes since construction (resets keep it).
  std::uint64_t allocations = 0;       ///< Views and children handed out since construction.
  std::uint64_t resets = 0;
  std::size_t live_children = 0;
};

class ScopedArena {
 public:
  static constexpr std::uint64_t default_alignment = 256;

  /// A root arena: one pinned block of `bytes` aligned to `alignment` from `pool`. Throws what
  /// Pool::allocate_pinned throws (invalid_argument, out_of_memory).
  ScopedArena(Pool& pool, std::uint64_t bytes, std::string name, std::uint64_t alignment = default_alignment);
  /// A child arena carved from the top of `parent`. Throws invalid_argument for zero bytes or a bad
  /// alignment, arena_exhausted when the parent has too little left, state_error for an orphan parent.
  ScopedArena(ScopedArena& parent, std::uint64_t bytes, std::string name,
              std::uint64_t alignment = default_alignment);
  /// Gives the memory back (see release()), recording instead of throwing any misuse.
  ~ScopedArena();
  ScopedArena(const ScopedArena&) = delete;
  ScopedArena& operator=(const ScopedArena&) = delete;

  /// `count` elements of T at an offset aligned to `alignment` (at least alignof(T)). Throws
  /// arena_exhausted (naming the arena, the request and what is left) when it does not fit, and
  /// invalid_argument for a bad alignment or an overflowing count; nothing changes then.
  template <class T>
  ArenaBuffer<T> allocate(std::size_t count, std::uint64_t alignment = default_alignment) {
    const std::uint64_t offset =
        take(checked_bytes(count, sizeof(T)), at_least(alignment, alignof(T)), "buffer");
    return ArenaBuffer<T>(*pool_, region_, root_address_, offset, count);
  }

  /// A width x height image of T, each row padded to `row_alignment` (the pitch); the image starts at
  /// an offset aligned to `row_alignment`.
  template <class T>
  ArenaImage<T> image(std::uint32_t width, std::uint32_t height,
                      std::uint64_t row_alignment = default_alignment) {
    const std::uint64_t pitch = image_pitch(width, height, sizeof(T), at_least(row_alignment, alignof(T)));
    const std::uint64_t offset = take(pitch * height, at_least(row_alignment, alignof(T)), "image");
    return ArenaImage<T>(*pool_, region_, root_address_, offset, width, height, pitch);
  }

  /// Byte-level allocation: the offset in the root region of `bytes` aligned to `alignment`.
  std::uint64_t allocate_bytes(std::uint64_t bytes, std::uint64_t alignment = default_alignment);

  /// Rewinds the bump pointer to the base: every view handed out before is stale (its bytes will be
  /// handed out again). Throws state_error with live children, recorded misuse, or when orphaned.
  void reset();
  /// Gives the memory back now (to the pool for a root, to the parent for a child); the destructor
  /// then does nothing. Throws state_error, changing nothing, when children live, when this child is
  /// not its parent's newest live child, on recorded misuse, or when orphaned.
  void release();

  const std::string& name() const noexcept { return name_; }
  std::uint64_t capacity_bytes() const noexcept { return capacity_; }
  std::uint64_t used_bytes() const noexcept { return used_; }
  std::uint64_t high_water_bytes() const noexcept { return high_water_; }
  std::uint64_t remaining_bytes() const noexcept { return capacity_ - used_; }
  /// Device address of the arena's first byte (fixed for its life).
  std::uint64_t address() const noexcept { return root_address_ + base_offset_; }
  bool released() const noexcept { return released_; }
  ArenaStatistics statistics() const noexcept;
  Pool& pool() const noexcept { return *pool_; }

 private:
  struct Child {
    ScopedArena* arena;
    std::uint64_t used_before;  // the parent's used_ before the child was carved: restored when it goes
    bool alive;
  };

  /// The requested alignment raised to `minimum` (alignof(T)); throws invalid_argument, naming it,
  /// when the request itself is 0 or not a power of two, whatever T is.
  static std::uint64_t at_least(std::uint64_t alignment, std::uint64_t minimum);
  static std::uint64_t checked_bytes(std::size_t count, std::size_t element_bytes);
  static std::uint64_t image_pitch(std::uint32_t width, std::uint32_t height, std::size_t element_bytes,
                                   std::uint64_t row_alignment);
  /// Bumps `bytes` at `alignment`; returns the offset in the root region. Checks state first.
  std::uint64_t take(std::uint64_t bytes, std::uint64_t alignment, const char* what);
  std::uint64_t bump(std::uint64_t bytes, std::uint64_t alignment, const char* what);
  void check_usable(const char* operation) const;
  void throw_recorded_misuse(const char* operation);
  /// Called by a child that goes away: marks it dead and rewinds over dead children at the top.
  void child_gone(ScopedArena* child) noexcept;
  void give_back() noexcept;

  Pool* pool_ = nullptr;
  ScopedArena* parent_ = nullptr;  // null for a root
  Handle region_{};                // the root's pool block
  std::uint64_t root_address_ = 0;
  std::uint64_t base_offset_ = 0;  // this arena's first byte in the root region
  std::uint64_t capacity_ = 0;
  std::uint64_t used_ = 0;
  std::uint64_t high_water_ = 0;
  std::uint64_t allocations_ = 0;
  std::uint64_t resets_ = 0;
  std::string name_;
  std::vector<Child> children_;  // in creation order; the newest is at the top
  std::vector<std::string> misuse_;
  std::string orphaned_by_;  // set when the parent went away first
  bool released_ = false;
};

}  // namespace vramkit
