// Virtual device: address ranges with no bytes behind them, as VMA's virtual blocks and RMM's
// simulated resource. Trace replay and planning run on it at heap speed.
#include <mutex>

#include <vramkit/detail/message.hpp>
#include <vramkit/device.hpp>
#include <vramkit/errors.hpp>
#include <vramkit/units.hpp>

namespace vramkit {
namespace {

class VirtualDevice final : public Device {
 public:
  explicit VirtualDevice(std::uint64_t capacity) : capacity_(capacity) {}
  DeviceKind kind() const noexcept override { return DeviceKind::virtual_memory; }
  std::string name() const override { return "virtual (address ranges without memory)"; }
  Region obtain(std::uint64_t bytes) override {
    std::lock_guard lock(mutex_);
    if (bytes == 0 || bytes > capacity_ - obtained_) {
      throw out_of_memory(detail::message("virtual device: requested ", format_bytes(bytes), "; ",
                                          format_bytes(capacity_ - obtained_), " left"));
    }
    obtained_ += bytes;
    const std::uint64_t address = next_address_;
    next_address_ += (bytes + (2_MiB - 1)) & ~(2_MiB - 1);
    return {address, bytes};
  }
  void release(Region region) noexcept override {
    std::lock_guard lock(mutex_);
    obtained_ -= region.bytes;
  }
  void copy_from_host(std::uint64_t, const void*, std::uint64_t, Stream) override { no_memory("copy"); }
  void copy_to_host(void*, std::uint64_t, std::uint64_t, Stream) override { no_memory("copy"); }
  void fill(std::uint64_t, std::byte, std::uint64_t, Stream) override { no_memory("fill"); }
  std::uint64_t find_mismatch(std::uint64_t, std::byte, std::uint64_t bytes) override { return bytes; }
  ExecutionResult execute(const compactor::ChunkPlan&, std::size_t) override { return {}; }
  DeviceMemoryInfo memory_info() override {
    std::lock_guard lock(mutex_);
    return {capacity_ - obtained_, capacity_};
  }

 private:
  [[noreturn]] static void no_memory(const char* what) {
    throw state_error(detail::message("the virtual device has no memory to ", what,
                                      "; use the host or CUDA device for data"));
  }
  std::mutex mutex_;
  std::uint64_t capacity_;
  std::uint64_t obtained_ = 0;
  std::uint64_t next_address_ = 1ull << 40;
};

}  // namespace

std::shared_ptr<Device> make_virtual_device(std::uint64_t capacity_bytes) {
  return std::make_shared<VirtualDevice>(capacity_bytes);
}

}  // namespace vramkit
