#pragma once
// std::allocator, except that a value-initialising construct() (vector::resize(n), emplace_back())
// default-initialises instead: for a trivial type it writes nothing. A vector resized with it
// before several threads fill its parts costs no serial pass of zeroes (Heap's nodes in a parallel
// rebuild, the pool's placements). Every element so made must be written before it is read.
#include <memory>
#include <new>
#include <type_traits>
#include <utility>

namespace vramkit::detail {

template <class T>
struct DefaultInitAllocator : std::allocator<T> {
  using std::allocator<T>::allocator;
  template <class U>
  struct rebind {
    using other = DefaultInitAllocator<U>;
  };
  template <class U>
  void construct(U* place) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(place)) U;
  }
  template <class U, class... Args>
  void construct(U* place, Args&&... args) {
    std::construct_at(place, std::forward<Args>(args)...);
  }
};

}  // namespace vramkit::detail
