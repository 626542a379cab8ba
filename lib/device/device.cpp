#include <algorithm>
#include <cstring>

#include <vramkit/device.hpp>
#include <vramkit/detail/message.hpp>
#include <vramkit/errors.hpp>
#include <vramkit/host_device.hpp>

namespace vramkit {

const char* to_string(DeviceKind kind) {
  switch (kind) {
    case DeviceKind::cuda: return "cuda";
    case DeviceKind::host: return "host";
    case DeviceKind::virtual_memory: return "virtual";
  }
  return "unknown";
}

namespace {
constexpr std::size_t error_text_room = 512;
}

void ExecutionResult::reserve_failure(std::size_t moves) {
  move_completed.reserve(moves);
  error.reserve(error_text_room);
}

void ExecutionResult::fail(const char* what, std::size_t moves, std::size_t completed_prefix) noexcept {
  complete = false;
  error.assign(what, std::min(std::strlen(what), error.capacity()));
  move_completed.assign(moves, 0);
  std::fill_n(move_completed.begin(), std::min(completed_prefix, moves), std::uint8_t{1});
}

ExecutionResult Device::execute_moves(gsl::span<const compactor::Move> moves,
                                      gsl::span<const std::uint64_t> segment_bases, compactor::ChunkPlan& scratch,
                                      const std::function<void()>& meanwhile, const HostThreads*) {
  compactor::make_chunk_plan(moves, segment_bases, scratch);
  ExecutionResult result = execute(scratch, moves.size());
  if (meanwhile) meanwhile();
  return result;
}

ExecutionResult Device::execute_moves_in_parts(std::vector<compactor::Move>& moves,
                                               gsl::span<const std::uint64_t> segment_bases,
                                               compactor::ChunkPlan& scratch, const PlanMore& plan_more,
                                               const std::function<void()>& meanwhile) {
  while (plan_more(moves)) {
  }
  return execute_moves(moves, segment_bases, scratch, meanwhile, nullptr);
}

void* Device::obtain_staging(std::size_t) {
  throw invalid_argument(detail::message("the device '", name(), "' stages slides its own way: no staging memory"));
}

void Device::release_staging(void*) noexcept {}

void Device::reserve_moves(std::size_t, std::uint64_t, bool) {}

ExecutionResult Device::execute_moves_as_written(gsl::span<const compactor::Move> room,
                                                 gsl::span<const std::uint64_t> segment_bases,
                                                 compactor::ChunkPlan& scratch, const MovesWritten& written,
                                                 const std::function<void()>& meanwhile, const HostThreads* threads,
                                                 compactor::detail::SlideMove*) {
  std::size_t count = 0;
  for (bool final = false; !final;) count = written(final, nothing_ahead());
  return execute_moves(room.first(count), segment_bases, scratch, meanwhile, threads);
}

std::shared_ptr<Device> make_device(DeviceChoice choice) {
  switch (choice) {
    case DeviceChoice::cuda: return make_cuda_device();
    case DeviceChoice::host: return make_host_device();
    case DeviceChoice::virtual_memory: return make_virtual_device();
    case DeviceChoice::automatic: break;
  }
  if (cuda_available()) return make_cuda_device();
  return make_host_device();
}

}  // namespace vramkit
