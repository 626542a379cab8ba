#pragma once
// A device that forwards every call to a host device (shuffled chunk order): tests derive from it
// and override the one behaviour they inject or observe.
#include <memory>
#include <string>

#include <vramkit/device.hpp>
#include <vramkit/host_device.hpp>

namespace vramkit_test {

class ForwardingDevice : public vramkit::Device {
 public:
  vramkit::DeviceKind kind() const noexcept override { return host_->kind(); }
  std::string name() const override { return "forwarding to " + host_->name(); }
  vramkit::Region obtain(std::uint64_t bytes) override { return host_->obtain(bytes); }
  void release(vramkit::Region region) noexcept override { host_->release(region); }
  void copy_from_host(std::uint64_t destination, const void* source, std::uint64_t bytes,
                      vramkit::Stream stream) override {
    host_->copy_from_host(destination, source, bytes, stream);
  }
  void copy_to_host(void* destination, std::uint64_t source, std::uint64_t bytes, vramkit::Stream stream) override {
    host_->copy_to_host(destination, source, bytes, stream);
  }
  void fill(std::uint64_t destination, std::byte value, std::uint64_t bytes, vramkit::Stream stream) override {
    host_->fill(destination, value, bytes, stream);
  }
  std::uint64_t find_mismatch(std::uint64_t address, std::byte value, std::uint64_t bytes) override {
    return host_->find_mismatch(address, value, bytes);
  }
  vramkit::ExecutionResult execute(const vramkit::compactor::ChunkPlan& plan, std::size_t moves) override {
    return host_->execute(plan, moves);
  }
  vramkit::ExecutionResult execute_moves(gsl::span<const vramkit::compactor::Move> moves,
                                         gsl::span<const std::uint64_t> segment_bases,
                                         vramkit::compactor::ChunkPlan& scratch,
                                         const std::function<void()>& meanwhile,
                                         const vramkit::HostThreads* threads) override {
    return host_->execute_moves(moves, segment_bases, scratch, meanwhile, threads);
  }
  vramkit::DeviceMemoryInfo memory_info() override { return host_->memory_info(); }
  bool host_addressable() const noexcept override { return host_->host_addressable(); }

 protected:
  std::shared_ptr<vramkit::Device> host_ = vramkit::make_host_device({.shuffle_seed = 7});
};

}  // namespace vramkit_test
