#pragma once
// Comparing large buffers in tests without Catch printing them.
#include <algorithm>
#include <cstddef>

namespace vramkit_test {

/// first_difference's answer when the two hold the same elements.
inline constexpr std::size_t no_difference = static_cast<std::size_t>(-1);

/// The first index where `a` and `b` differ (an element that one lacks counts), or no_difference.
/// Check this rather than `a == b` on large buffers: a failure then prints one number, where
/// Catch would print every element of both (for megabytes, minutes of formatting).
template <class A, class B> std::size_t first_difference(const A& a, const B& b) {
  const auto [left, right] = std::mismatch(a.begin(), a.end(), b.begin(), b.end());
  if (left == a.end() && right == b.end()) return no_difference;
  return static_cast<std::size_t>(left - a.begin());
}

}  // namespace vramkit_test
