#pragma once
// Typed errors. Every error raised for bad input names the offending value and the limit it broke,
// and is raised before anything changes. Releasing (free, unpin, destructors) never throws.
#include <new>
#include <stdexcept>
#include <string>

namespace vramkit {

/// A request that can never succeed or misuses the API: bad size, alignment, option or name.
class invalid_argument : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/// A handle that is stale (its buffer was freed), foreign (another pool's) or empty (moved-from).
class invalid_handle : public invalid_argument {
 public:
  using invalid_argument::invalid_argument;
};

/// An operation that the buffer's state forbids: freeing or compacting a pinned buffer, say.
class state_error : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/// The pool (or an arena) cannot serve a request that is valid in itself. Like RMM's, it derives
/// from std::bad_alloc; what() carries the request and the pool's statistics.
class out_of_memory : public std::bad_alloc {
 public:
  explicit out_of_memory(std::string message) : message_(std::move(message)) {}
  const char* what() const noexcept override { return message_.c_str(); }

 private:
  std::string message_;
};

/// A ScopedArena (or PlannedBatch region) too small for a request; what() names the arena, the
/// request and the bytes left. Nothing already handed out changes.
class arena_exhausted : public out_of_memory {
 public:
  using out_of_memory::out_of_memory;
};

/// A failure reported by the device: a CUDA error, or a fault injected into the host device.
class device_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A guard margin whose pattern was overwritten: something wrote past the end of a buffer.
class corruption_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace vramkit
