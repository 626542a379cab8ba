#pragma once
// HostDevice: simulated device memory in host RAM. It serves CPU-only users, the samples when no
// GPU is present, and every test in CI. It can fail on purpose (fault injection) and can run a
// compaction's chunks in a random order that the dependency rules allow, so tests prove the rules.
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_map>

#include <vramkit/device.hpp>

namespace vramkit {

/// Fault injection: the k-th call (1-based, counted from creation or the last set_faults) of each
/// kind fails with device_error before it changes anything; 0 never fails.
struct HostFaults {
  std::uint64_t obtain_at = 0;
  std::uint64_t copy_at = 0;  ///< Host-device copies and fills.
  std::uint64_t move_at = 0;  ///< Counts moves of chunk plans: the k-th move to start fails before it writes.
  /// Counts the non-empty parts of execute_moves_in_parts and execute_moves_as_written: the k-th
  /// throws device_error before it runs, as a part the CUDA device cannot queue (its scratch
  /// cannot grow) after earlier parts ran.
  std::uint64_t part_at = 0;
};

struct HostDeviceOptions {
  std::uint64_t capacity_bytes = 64ull << 30;  ///< The simulated memory size memory_info() reports.
  HostFaults faults;
  std::uint64_t shuffle_seed = 0;  ///< != 0: run chunks in a seeded random order the rules allow.
};

/// How many calls of each kind the device has seen (for walking fault points in tests).
struct HostCallCounts {
  std::uint64_t obtains = 0;
  std::uint64_t copies = 0;
  std::uint64_t moves = 0;
  std::uint64_t parts = 0;
};

class HostDevice final : public Device {
 public:
  explicit HostDevice(HostDeviceOptions options = {});
  ~HostDevice() override;

  DeviceKind kind() const noexcept override { return DeviceKind::host; }
  std::string name() const override { return "host (simulated device memory in host RAM)"; }
  Region obtain(std::uint64_t bytes) override;
  void release(Region region) noexcept override;
  void copy_from_host(std::uint64_t destination, const void* source, std::uint64_t bytes, Stream stream) override;
  void copy_to_host(void* destination, std::uint64_t source, std::uint64_t bytes, Stream stream) override;
  void fill(std::uint64_t destination, std::byte value, std::uint64_t bytes, Stream stream) override;
  std::uint64_t find_mismatch(std::uint64_t address, std::byte value, std::uint64_t bytes) override;
  ExecutionResult execute(const compactor::ChunkPlan& plan, std::size_t moves) override;
  /// Runs each part as soon as it is planned, before the next is (as the CUDA device may), so
  /// tests see that every prefix of the parts is executable alone. After a failed part (a fault,
  /// or an exception while it is prepared), the rest is still planned but not run, and the result
  /// says which moves completed: those of the parts before it, and those of it that did.
  ExecutionResult execute_moves_in_parts(std::vector<compactor::Move>& moves,
                                         gsl::span<const std::uint64_t> segment_bases, compactor::ChunkPlan& scratch,
                                         const PlanMore& plan_more, const std::function<void()>& meanwhile) override;
  /// The same, each written prefix run as a part (faults.part_at counts these parts too).
  ExecutionResult execute_moves_as_written(gsl::span<const compactor::Move> room,
                                           gsl::span<const std::uint64_t> segment_bases, compactor::ChunkPlan& scratch,
                                           const MovesWritten& written, const std::function<void()>& meanwhile,
                                           const HostThreads* threads, compactor::detail::SlideMove* staged) override;
  DeviceMemoryInfo memory_info() override;
  bool host_addressable() const noexcept override { return true; }

  /// Resets the call counts and arms new faults.
  void set_faults(HostFaults faults);
  HostCallCounts counts() const;

 private:
  void count_copy();
  ExecutionResult execute_shuffled(const compactor::ChunkPlan& plan);
  /// The plan so far, given by next(more) until it clears `more`; room: the most moves it reaches.
  using NextPart = std::function<gsl::span<const compactor::Move>(bool& more)>;
  ExecutionResult run_parts(std::size_t room, gsl::span<const std::uint64_t> segment_bases,
                            compactor::ChunkPlan& scratch, const NextPart& next, const std::function<void()>& meanwhile);

  mutable std::mutex mutex_;
  HostDeviceOptions options_;
  HostCallCounts counts_;
  std::uint64_t obtained_bytes_ = 0;
  std::unordered_map<std::uint64_t, std::uint64_t> regions_;  // address -> bytes
};

std::shared_ptr<HostDevice> make_host_device(HostDeviceOptions options = {});

}  // namespace vramkit
