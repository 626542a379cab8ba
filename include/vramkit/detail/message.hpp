#pragma once
// Builds error messages from pieces: message("requested ", bytes, "; limit ", limit).
#include <sstream>
#include <string>

namespace vramkit::detail {

template <class... Parts>
std::string message(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}

}  // namespace vramkit::detail
