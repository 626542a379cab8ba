// Host device: regions are 256-byte-aligned host allocations; addresses are host pointers.
#include <vramkit/host_device.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include <vramkit/detail/message.hpp>
#include <vramkit/errors.hpp>
#include <vramkit/units.hpp>

namespace vramkit {
namespace {
void* as_pointer(std::uint64_t address) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)); }
}  // namespace

HostDevice::HostDevice(HostDeviceOptions options) : options_(options) {}

HostDevice::~HostDevice() {
  for (const auto& [address, bytes] : regions_) std::free(as_pointer(address));
}

Region HostDevice::obtain(std::uint64_t bytes) {
  std::lock_guard lock(mutex_);
  if (++counts_.obtains == options_.faults.obtain_at) {
    throw device_error(detail::message("injected fault: region request ", counts_.obtains, " (", bytes, " bytes)"));
  }
  if (bytes == 0 || bytes > options_.capacity_bytes - obtained_bytes_) {
    throw out_of_memory(detail::message("host device: requested ", format_bytes(bytes), "; ",
                                        format_bytes(options_.capacity_bytes - obtained_bytes_), " of ",
                                        format_bytes(options_.capacity_bytes), " simulated memory left"));
  }
  // 2 MiB aligned, like large cudaMalloc regions: the pool then needs no alignment slack.
  void* memory = std::aligned_alloc(2_MiB, (bytes + 2_MiB - 1) & ~(2_MiB - 1));
  if (memory == nullptr) throw out_of_memory(detail::message("host RAM: cannot allocate ", format_bytes(bytes)));
  const auto address = static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(memory));
  try {
    regions_.emplace(address, bytes);
  } catch (...) {  // host memory for the bookkeeping ran out: the region goes back
    std::free(memory);
    throw;
  }
  obtained_bytes_ += bytes;
  return {address, bytes};
}

void HostDevice::release(Region region) noexcept {
  std::lock_guard lock(mutex_);
  if (regions_.erase(region.address) != 0) {
    obtained_bytes_ -= region.bytes;
    std::free(as_pointer(region.address));
  }
}

void HostDevice::count_copy() {
  std::lock_guard lock(mutex_);
  if (++counts_.copies == options_.faults.copy_at) {
    throw device_error(detail::message("injected fault: copy ", counts_.copies));
  }
}

void HostDevice::copy_from_host(std::uint64_t destination, const void* source, std::uint64_t bytes, Stream) {
  count_copy();
  if (bytes == 0) return;  // an empty span may carry a null pointer, which memcpy must not get
  std::memcpy(as_pointer(destination), source, bytes);
}

void HostDevice::copy_to_host(void* destination, std::uint64_t source, std::uint64_t bytes, Stream) {
  count_copy();
  if (bytes == 0) return;
  std::memcpy(destination, as_pointer(source), bytes);
}

void HostDevice::fill(std::uint64_t destination, std::byte value, std::uint64_t bytes, Stream) {
  count_copy();
  if (bytes == 0) return;
  std::memset(as_pointer(destination), std::to_integer<int>(value), bytes);
}

std::uint64_t HostDevice::find_mismatch(std::uint64_t address, std::byte value, std::uint64_t bytes) {
  const auto* data = static_cast<const std::byte*>(as_pointer(address));
  return static_cast<std::uint64_t>(std::find_if(data, data + bytes, [&](std::byte b) { return b != value; }) - data);
}

// Ticket order, one chunk at a time: read then write. Every chunk a chunk waits for holds an
// earlier ticket of its phase, so it has already read. Moves complete in source order, so a fault
// at a move boundary leaves the completed moves done and the others untouched.
ExecutionResult HostDevice::execute(const compactor::ChunkPlan& plan, std::size_t moves) {
  compactor::check_move_indices(plan, moves);
  if (options_.shuffle_seed != 0 && options_.faults.move_at == 0) return execute_shuffled(plan);
  std::vector<std::uint32_t> chunks_left(moves, 0);
  for (const auto& chunk : plan.chunks) ++chunks_left[chunk.move];
  std::vector<std::uint8_t> started(moves, 0);
  ExecutionResult result;
  result.reserve_failure(moves);  // a fault after moves ran is reported without allocating
  for (const auto& chunk : plan.chunks) {
    if (!started[chunk.move]) {
      std::uint64_t move_number;
      {
        std::lock_guard lock(mutex_);
        move_number = ++counts_.moves;
      }
      if (move_number == options_.faults.move_at) {
        char what[64];
        std::snprintf(what, sizeof what, "injected fault: move %llu", static_cast<unsigned long long>(move_number));
        result.fail(what, moves, 0);
        for (std::size_t move = 0; move < moves; ++move) result.move_completed[move] = chunks_left[move] == 0;
        return result;
      }
      started[chunk.move] = 1;
    }
    std::memmove(as_pointer(chunk.destination), as_pointer(chunk.source), chunk.bytes);
    --chunks_left[chunk.move];
  }
  return result;
}

// Reports a failed part without allocating (host memory may be what ran out): the room for the
// result is taken before the first part runs, for as many moves as the plan has room for (the
// pool's planner never needs more).
ExecutionResult HostDevice::execute_moves_in_parts(std::vector<compactor::Move>& moves,
                                                   gsl::span<const std::uint64_t> segment_bases,
                                                   compactor::ChunkPlan& scratch, const PlanMore& plan_more,
                                                   const std::function<void()>& meanwhile) {
  return run_parts(
      moves.capacity(), segment_bases, scratch,
      [&](bool& more) {
        more = plan_more(moves);
        return gsl::span<const compactor::Move>(moves);
      },
      meanwhile);
}

ExecutionResult HostDevice::execute_moves_as_written(gsl::span<const compactor::Move> room,
                                                     gsl::span<const std::uint64_t> segment_bases,
                                                     compactor::ChunkPlan& scratch, const MovesWritten& written,
                                                     const std::function<void()>& meanwhile, const HostThreads*,
                                                     compactor::detail::SlideMove*) {
  return run_parts(
      room.size(), segment_bases, scratch,
      [&](bool& more) { return written_prefix(room, written, more); },
      meanwhile);
}

ExecutionResult HostDevice::run_parts(std::size_t room, gsl::span<const std::uint64_t> segment_bases,
                                      compactor::ChunkPlan& scratch, const NextPart& next,
                                      const std::function<void()>& meanwhile) {
  ExecutionResult result;
  result.reserve_failure(room);
  std::size_t planned = 0;  // moves of the parts seen so far
  gsl::span<const compactor::Move> moves;
  for (bool more = true; more;) {
    moves = next(more);
    const auto part = moves.subspan(planned);
    if (!part.empty() && result.complete) {
      try {  // nothing of the part has run when this throws: the parts before it have
        {
          std::lock_guard lock(mutex_);
          if (++counts_.parts == options_.faults.part_at)
            throw device_error(detail::message("injected fault: part ", counts_.parts, " cannot be queued"));
        }
        compactor::make_chunk_plan(part, segment_bases, scratch);
        const ExecutionResult ran = execute(scratch, part.size());
        if (!ran.complete) {
          result.fail(ran.error.c_str(), moves.size(), planned);
          std::copy(ran.move_completed.begin(), ran.move_completed.end(), result.move_completed.begin() + planned);
        }
      } catch (const std::exception& error) {
        result.fail(error.what(), moves.size(), planned);
      }
    }
    planned = moves.size();
  }
  if (!result.complete) result.move_completed.resize(moves.size(), 0);
  if (meanwhile) meanwhile();
  return result;
}

// A random interleaving of reads and writes that the rules allow: a chunk reads whenever its phase
// has begun; it writes once every chunk in its wait range has read. Tests run plans this way so a
// missing dependency shows up as wrong bytes.
ExecutionResult HostDevice::execute_shuffled(const compactor::ChunkPlan& plan) {
  std::mt19937_64 random(options_.shuffle_seed++);
  std::vector<std::uint8_t> has_read(plan.chunks.size(), 0);
  std::vector<std::vector<std::byte>> held(plan.chunks.size());
  // Every buffer before the first write: running out of host memory part way would leave some
  // chunks written and the plan reported as not run (execute_moves_in_parts).
  for (std::size_t index = 0; index < plan.chunks.size(); ++index) held[index].reserve(plan.chunks[index].bytes);
  for (std::size_t phase = 0; phase < plan.phases(); ++phase) {
    std::vector<std::uint32_t> unread, unwritten;
    for (std::uint32_t index = plan.phase_begin[phase]; index < plan.phase_begin[phase + 1]; ++index) {
      unread.push_back(index);
    }
    auto ready = [&](std::uint32_t index) {
      const auto& chunk = plan.chunks[index];
      if (chunk.wait_first == compactor::no_wait) return true;
      for (std::uint32_t other = chunk.wait_first; other <= chunk.wait_last; ++other) {
        if (!has_read[other]) return false;
      }
      return true;
    };
    while (!unread.empty() || !unwritten.empty()) {
      bool wrote = false;
      if (!unwritten.empty() && (unread.empty() || random() % 2 == 0)) {
        const std::size_t pick = random() % unwritten.size();
        const std::uint32_t index = unwritten[pick];
        if (ready(index)) {
          const auto& chunk = plan.chunks[index];
          std::memcpy(as_pointer(chunk.destination), held[index].data(), chunk.bytes);
          held[index] = {};
          unwritten[pick] = unwritten.back();
          unwritten.pop_back();
          wrote = true;
        }
      }
      if (!wrote && !unread.empty()) {
        const std::size_t pick = random() % unread.size();
        const std::uint32_t index = unread[pick];
        const auto& chunk = plan.chunks[index];
        const auto* source = static_cast<const std::byte*>(as_pointer(chunk.source));
        held[index].assign(source, source + chunk.bytes);
        has_read[index] = 1;
        unread[pick] = unread.back();
        unread.pop_back();
        unwritten.push_back(index);
      }
    }
  }
  return {};
}

DeviceMemoryInfo HostDevice::memory_info() {
  std::lock_guard lock(mutex_);
  return {options_.capacity_bytes - obtained_bytes_, options_.capacity_bytes};
}

void HostDevice::set_faults(HostFaults faults) {
  std::lock_guard lock(mutex_);
  options_.faults = faults;
  counts_ = {};
}

HostCallCounts HostDevice::counts() const {
  std::lock_guard lock(mutex_);
  return counts_;
}

std::shared_ptr<HostDevice> make_host_device(HostDeviceOptions options) {
  return std::make_shared<HostDevice>(options);
}

}  // namespace vramkit
