// CUDA device: regions from cudaMalloc, copies on the caller's stream, compaction on a stream of
// its own, stream uses as events. The only file (with the move kernel) that calls the CUDA runtime.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "compactor/chunk_plan_paths.hpp"
#include "device/cuda/move_kernel.hpp"
#include <vramkit/detail/message.hpp>
#include <vramkit/device.hpp>
#include <vramkit/errors.hpp>
#include <vramkit/units.hpp>

namespace vramkit {
namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    throw device_error(detail::message(what, " failed: ", cudaGetErrorName(status), " (", cudaGetErrorString(status),
                                       ")"));
  }
}

/// Moves of a slide below which staging them takes no lent threads (CudaDevice::queue_slide).
constexpr std::size_t parallel_staging_min_moves = 8192;

void* as_pointer(std::uint64_t address) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(address)); }

// The staging buffer takes a plan's chunks as they are: the two layouts must be one.
using compactor::Chunk;
using cuda_detail::DeviceChunk;
using compactor::detail::SlideMove;
using cuda_detail::MoveKernel;
static_assert(sizeof(compactor::detail::SlideChunk) == sizeof(Chunk) &&
              offsetof(compactor::detail::SlideChunk, wait_last) == offsetof(Chunk, wait_last));
static_assert(std::is_trivially_copyable_v<Chunk> && std::is_trivially_copyable_v<DeviceChunk>);
static_assert(sizeof(Chunk) == sizeof(DeviceChunk) && alignof(Chunk) == alignof(DeviceChunk));
static_assert(offsetof(Chunk, source) == offsetof(DeviceChunk, source) &&
              offsetof(Chunk, destination) == offsetof(DeviceChunk, destination) &&
              offsetof(Chunk, bytes) == offsetof(DeviceChunk, bytes) &&
              offsetof(Chunk, move) == offsetof(DeviceChunk, move) &&
              offsetof(Chunk, wait_first) == offsetof(DeviceChunk, wait_first) &&
              offsetof(Chunk, wait_last) == offsetof(DeviceChunk, wait_last));

// A test hook's count from the environment: 0 when unset; invalid_argument naming the value unless
// it is a decimal count.
std::uint64_t test_hook(const char* name, const char* meaning) {
  const char* value = std::getenv(name);
  if (value == nullptr) return 0;
  const std::string text = value;
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != std::string::npos)
    throw invalid_argument(detail::message(name, " is '", text, "'; use ", meaning));
  return std::stoull(text);
}

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int ordinal) : ordinal_(ordinal) {
    // The environment first: a constructor that throws leaves nothing to release.
    fail_move_launch_at_ =
        test_hook("VRAMKIT_CUDA_FAIL_MOVE_LAUNCH", "the number of the move-kernel launch to fail (1 is the first)");
    fail_growth_at_ = test_hook("VRAMKIT_CUDA_FAIL_BUFFER_GROWTH",
                                "the number of the staging or scratch growth to fail once (1 is the first)");
    if (const char* choice = std::getenv("VRAMKIT_MOVE_KERNEL")) {
      const std::string name = choice;
      if (name == "block") forced_kernel_ = MoveKernel::block;
      else if (name == "warp") forced_kernel_ = MoveKernel::warp;
      else if (name != "auto")
        throw invalid_argument("VRAMKIT_MOVE_KERNEL is '" + name + "'; use 'auto', 'block' or 'warp'");
    }
    check(cudaSetDevice(ordinal), "cudaSetDevice");
    cudaDeviceProp properties{};
    check(cudaGetDeviceProperties(&properties, ordinal), "cudaGetDeviceProperties");
    name_ = detail::message(properties.name, " (CUDA device ", ordinal, ")");
    multiprocessors_ = properties.multiProcessorCount;
    check(cudaStreamCreate(&stream_), "cudaStreamCreate");
    try {  // a constructor that throws runs no destructor: the streams made so far go here
      check(cudaStreamCreateWithFlags(&prep_stream_, cudaStreamNonBlocking), "cudaStreamCreate");
      for (const MoveKernel kernel : {MoveKernel::block, MoveKernel::warp}) {
        int per_multiprocessor = 1;
        check(cuda_detail::move_blocks_per_multiprocessor(kernel, &per_multiprocessor),
              "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
        // A few multiprocessors keep a block's room free, where the next part's chunk derivation
        // runs while this part moves (a full grid holds every register until its tail).
        move_blocks_[static_cast<int>(kernel)] = static_cast<unsigned>(
            std::max(1, std::max(1, per_multiprocessor) * multiprocessors_ - std::max(1, multiprocessors_ / 16)));
      }
    } catch (...) {
      if (prep_stream_ != nullptr) cudaStreamDestroy(prep_stream_);
      cudaStreamDestroy(stream_);
      throw;
    }
  }

  ~CudaDevice() override {
    cudaSetDevice(ordinal_);
    cudaStreamSynchronize(prep_stream_);
    cudaStreamSynchronize(stream_);
    for (auto& [token, event] : events_) cudaEventDestroy(event);
    for (cudaEvent_t event : spare_events_) cudaEventDestroy(event);
    for (cudaEvent_t event : retired_events_) cudaEventDestroy(event);
    for (cudaEvent_t event : prepared_events_) cudaEventDestroy(event);
    for (cudaEvent_t event : moved_events_) cudaEventDestroy(event);
    free_buffer(scratch_);
    free_buffer(staging_);
    free_outgrown();
    cudaStreamDestroy(prep_stream_);
    cudaStreamDestroy(stream_);
  }

  DeviceKind kind() const noexcept override { return DeviceKind::cuda; }
  std::string name() const override { return name_; }

  Region obtain(std::uint64_t bytes) override {
    check(cudaSetDevice(ordinal_), "cudaSetDevice");
    void* memory = nullptr;
    const cudaError_t status = cudaMalloc(&memory, bytes);
    if (status == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // clear it: an allocation failure is not sticky
      size_t free_bytes = 0, total_bytes = 0;
      cudaMemGetInfo(&free_bytes, &total_bytes);
      throw out_of_memory(detail::message("cudaMalloc of ", format_bytes(bytes), " failed; the device has ",
                                          format_bytes(free_bytes), " free of ", format_bytes(total_bytes)));
    }
    check(status, "cudaMalloc");
    return {static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(memory)), bytes};
  }

  void release(Region region) noexcept override {
    cudaSetDevice(ordinal_);
    cudaFree(as_pointer(region.address));
  }

  void copy_from_host(std::uint64_t destination, const void* source, std::uint64_t bytes, Stream stream) override {
    check(cudaMemcpyAsync(as_pointer(destination), source, bytes, cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }

  void copy_to_host(void* destination, std::uint64_t source, std::uint64_t bytes, Stream stream) override {
    check(cudaMemcpyAsync(destination, as_pointer(source), bytes, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }

  void fill(std::uint64_t destination, std::byte value, std::uint64_t bytes, Stream stream) override {
    check(cudaMemsetAsync(as_pointer(destination), std::to_integer<int>(value), bytes, stream), "cudaMemsetAsync");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  }

  std::uint64_t find_mismatch(std::uint64_t address, std::byte value, std::uint64_t bytes) override {
    std::vector<std::byte> copy(bytes);
    copy_to_host(copy.data(), address, bytes, stream_);
    return static_cast<std::uint64_t>(std::find_if(copy.begin(), copy.end(), [&](std::byte b) { return b != value; }) -
                                      copy.begin());
  }

  // A caller's own plan: the move kernels copy 16-byte vectors, at most max_chunk_bytes a chunk
  // (what the pool's plans always are); anything else is refused before anything is queued. The
  // kernel is chosen by the plan's longest chunk (kernel_for_chunks), not by its chunk_bytes.
  ExecutionResult execute(const compactor::ChunkPlan& plan, std::size_t moves) override {
    compactor::check_move_indices(plan, moves);
    std::uint32_t largest = 0;
    for (std::size_t index = 0; index < plan.chunks.size(); ++index) {
      const compactor::Chunk& chunk = plan.chunks[index];
      largest = std::max(largest, chunk.bytes);
      if (chunk.bytes > cuda_detail::max_chunk_bytes || ((chunk.bytes | chunk.source | chunk.destination) & 15) != 0) {
        throw invalid_argument(detail::message("chunk ", index, " of ", chunk.bytes, " bytes from ", chunk.source,
                                               " to ", chunk.destination, ": the CUDA device moves chunks of at most ",
                                               cuda_detail::max_chunk_bytes,
                                               " bytes, multiples of 16 at 16-byte-aligned addresses"));
      }
    }
    std::lock_guard lock(mutex_);
    ExecutionResult result;
    const MoveKernel kernel = cuda_detail::kernel_for_chunks(largest, forced_kernel_.value_or(MoveKernel::warp));
    run_queued([&](Buffers& used) { queue_plan_or_report(plan, kernel, moves, used, result); }, nullptr);
    return result;
  }

  // A slide (what a full compaction without pinned blocks plans) goes to the GPU as its moves, one
  // pass over them on the host; the GPU splits them into chunks and finds each chunk's waits
  // (compactor/slide_math.hpp), then the move kernel runs them. Other moves take the host's plan.
  ExecutionResult execute_moves(gsl::span<const compactor::Move> moves, gsl::span<const std::uint64_t> segment_bases,
                                compactor::ChunkPlan& scratch, const std::function<void()>& meanwhile,
                                const HostThreads* threads) override {
    std::lock_guard lock(mutex_);
    ExecutionResult result;
    run_queued(
        [&](Buffers& used) {
          if (queue_slide(moves, segment_bases, used, threads)) return;
          const MoveKernel kernel = kernel_for(moves);
          compactor::make_chunk_plan(moves, segment_bases, scratch, cuda_detail::chunk_limit(kernel));
          queue_plan_or_report(scratch, kernel, moves.size(), used, result);
        },
        meanwhile);
    return result;
  }

  // Each part is queued as soon as it is planned, behind the parts before it on stream_ (which
  // the kernel of a part then waits for), and the next is planned while the GPU moves it. A part's
  // upload and chunk derivation run beside the move of the part before it (preparation_stream). The
  // first part that is not a slide is queued with all the rest as one chunk plan.
  ExecutionResult execute_moves_in_parts(std::vector<compactor::Move>& moves,
                                         gsl::span<const std::uint64_t> segment_bases, compactor::ChunkPlan& scratch,
                                         const PlanMore& plan_more, const std::function<void()>& meanwhile) override {
    return queue_parts(
        moves.capacity(), segment_bases, scratch,
        [&](bool& more, const QueuedAhead&) {
          more = plan_more(moves);
          return gsl::span<const compactor::Move>(moves);
        },
        meanwhile, nullptr, nullptr);
  }

  // A caller that stages a slide itself counts chunks of the kernel that small moves take (a part
  // whose moves turn out large is chunked again when queued), in pinned memory of its own.
  std::uint32_t slide_chunk_bytes() const noexcept override {
    return cuda_detail::chunk_limit(forced_kernel_.value_or(MoveKernel::warp));
  }
  void* obtain_staging(std::size_t bytes) override {
    check(cudaSetDevice(ordinal_), "cudaSetDevice");
    void* memory = nullptr;
    check(cudaMallocHost(&memory, std::max<std::size_t>(bytes, 1)), "cudaMallocHost (compaction staging)");
    return memory;
  }
  void release_staging(void* memory) noexcept override {
    if (memory != nullptr) cudaFreeHost(memory);
  }

  // The room that queue_slide_moves takes over the parts of one slide's execution: each part's
  // moves, its chunks (at most a chunk a move plus one each warp_chunk_bytes: the warp form's,
  // the smaller) and their flags and ticket, each aligned, for up to reserve_parts parts; and,
  // unless the caller stages the moves, their pinned staging. Loads the kernels, which would
  // otherwise load on their first launch, and makes the events of the first reserve_parts parts.
  void reserve_moves(std::size_t moves, std::uint64_t bytes, bool caller_stages) override {
    constexpr std::size_t reserve_parts = 64;
    std::lock_guard lock(mutex_);
    check(cudaSetDevice(ordinal_), "cudaSetDevice");
    check(cuda_detail::load_move_kernels(), "loading the move kernels");
    if (moves == 0) return;
    for (auto* events : {&prepared_events_, &moved_events_}) {
      events->reserve(reserve_parts);
      while (events->size() < reserve_parts) events->push_back(make_event());
    }
    const std::uint64_t chunks = moves + bytes / cuda_detail::warp_chunk_bytes;
    reserve(scratch_, moves * sizeof(SlideMove) + chunks * sizeof(cuda_detail::DeviceChunk) +
                          (chunks + reserve_parts) * sizeof(unsigned) + 3 * 256 * reserve_parts);
    if (!caller_stages) reserve(staging_, moves * sizeof(SlideMove) + 256 * reserve_parts);
  }

  // The same, for moves that the caller's threads write while the GPU moves those written before.
  // The last part, written when those threads are free, is staged with them, unless the caller
  // staged every part itself.
  ExecutionResult execute_moves_as_written(gsl::span<const compactor::Move> room,
                                           gsl::span<const std::uint64_t> segment_bases, compactor::ChunkPlan& scratch,
                                           const MovesWritten& written, const std::function<void()>& meanwhile,
                                           const HostThreads* threads, SlideMove* staged) override {
    return queue_parts(
        room.size(), segment_bases, scratch,
        [&](bool& more, const QueuedAhead& ahead) { return written_prefix(room, written, more, ahead); },
        meanwhile, threads, staged);
  }

  UseToken record_use_end(Stream stream) override {
    std::lock_guard lock(mutex_);
    cudaEvent_t event = nullptr;
    if (!spare_events_.empty()) {
      event = spare_events_.back();
      spare_events_.pop_back();
    } else {
      // forget() is noexcept and puts an event on one of these lists: each has room for every
      // event there is, taken here (where a failure is an error the caller sees) and not there.
      const std::size_t owned = events_.size() + spare_events_.size() + retired_events_.size() + 1;
      for (auto* list : {&spare_events_, &retired_events_})
        if (list->capacity() < owned) list->reserve(std::max(owned, 2 * list->capacity()));
      check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    }
    const UseToken token = last_token_ + 1;
    try {
      check(cudaEventRecord(event, stream), "cudaEventRecord");
      events_.emplace(token, event);
    } catch (...) {
      spare_events_.push_back(event);  // room: it came from there, or was made room for above
      throw;
    }
    last_token_ = token;
    return token;
  }

  void order_after(UseToken token) override {
    std::lock_guard lock(mutex_);
    if (auto found = events_.find(token); found != events_.end()) pending_waits_.push_back(found->second);
  }

  void host_wait(UseToken token) override {
    cudaEvent_t event = nullptr;
    {
      std::lock_guard lock(mutex_);
      if (auto found = events_.find(token); found != events_.end()) event = found->second;
    }
    if (event != nullptr) check(cudaEventSynchronize(event), "cudaEventSynchronize");
  }

  bool use_ended(UseToken token) override {
    std::lock_guard lock(mutex_);
    auto found = events_.find(token);
    return found == events_.end() || cudaEventQuery(found->second) == cudaSuccess;
  }

  void forget(UseToken token) noexcept override {
    std::lock_guard lock(mutex_);
    if (auto found = events_.find(token); found != events_.end()) {
      // A forgotten event may still be waited on by a pending execute(); reuse it only after that.
      if (std::find(pending_waits_.begin(), pending_waits_.end(), found->second) == pending_waits_.end()) {
        spare_events_.push_back(found->second);
      } else {
        retired_events_.push_back(found->second);
      }
      events_.erase(found);
    }
  }

  void synchronize() override { check(cudaDeviceSynchronize(), "cudaDeviceSynchronize"); }

  DeviceMemoryInfo memory_info() override {
    check(cudaSetDevice(ordinal_), "cudaSetDevice");
    size_t free_bytes = 0, total_bytes = 0;
    check(cudaMemGetInfo(&free_bytes, &total_bytes), "cudaMemGetInfo");
    return {free_bytes, total_bytes};
  }

 private:
  static std::size_t align(std::size_t bytes) { return (bytes + 255) & ~std::size_t{255}; }

  // Makes the next work on stream_ wait for the events order_after() named.
  void enqueue_pending_waits() {
    for (cudaEvent_t event : pending_waits_) check(cudaStreamWaitEvent(stream_, event, 0), "cudaStreamWaitEvent");
    pending_waits_.clear();
    // The waits are enqueued: events forgotten meanwhile can be recorded again.
    spare_events_.insert(spare_events_.end(), retired_events_.begin(), retired_events_.end());
    retired_events_.clear();
  }

  // Where queued work finds its buffers: the parts of one execution are queued before any has run,
  // so each takes the next free bytes of the staging buffer and of the device scratch, and an
  // event of its own to mark its preparation done.
  struct Buffers {
    std::size_t staging = 0;  ///< Bytes of staging_ in use.
    std::size_t scratch = 0;  ///< Bytes of scratch_ in use.
    std::size_t parts = 0;    ///< Entries of prepared_events_ in use.
    std::size_t phases_launched = 0;  ///< Of the chunk plan queue_plan last queued.
    bool moving = false;      ///< A move kernel is queued on stream_.
    std::size_t moved = 0;    ///< Entries of moved_events_ recorded: one after each part's move.
  };

  // A buffer that grows when a part needs more than is left: pinned host memory (uploads read it)
  // or device memory (moves, chunk lists, flags).
  struct GrowingBuffer {
    bool host = false;
    void* data = nullptr;
    std::size_t bytes = 0;
    cudaError_t allocate(void** into, std::size_t size) const {
      return host ? cudaMallocHost(into, size) : cudaMalloc(into, size);
    }
    const char* allocation_name() const {
      return host ? "cudaMallocHost (compaction staging)" : "cudaMalloc (compaction scratch)";
    }
  };

  static void free_buffer(GrowingBuffer& buffer) noexcept {
    if (buffer.data != nullptr) buffer.host ? cudaFreeHost(buffer.data) : cudaFree(buffer.data);
    buffer.data = nullptr;
    buffer.bytes = 0;
  }

  // The next `bytes` of `buffer`, from `used` on. When they do not fit, takes a buffer twice as
  // large as needed; the outgrown one, which work already queued may still read or write, is kept
  // until the execution's work is done (free_outgrown), so the GPU goes on moving meanwhile. (It
  // used to wait for that work here: a compaction in parts that outgrew its buffers, as a pool's
  // first does, drained the pipeline at each growth.) Keeping them raises the peak (by half for a
  // pool's parts of 1, 2, 6 and 18 27ths, by up to twice in general): when that memory is not there,
  // it waits, frees them and the buffer at hand, and tries once more. Throws if that fails too.
  void* take(GrowingBuffer& buffer, std::size_t& used, std::size_t bytes) {
    if (used + bytes > buffer.bytes) {
      const std::size_t size = 2 * (used + bytes);
      outgrown_.reserve(outgrown_.size() + 1);  // the push_back below then cannot throw
      void* data = nullptr;
      // VRAMKIT_CUDA_FAIL_BUFFER_GROWTH=k: a test hook that makes the k-th growth's first try fail.
      cudaError_t error = ++growths_ == fail_growth_at_ ? cudaErrorMemoryAllocation : buffer.allocate(&data, size);
      if (error == cudaErrorMemoryAllocation) {
        cudaGetLastError();  // not a sticky error: clear it
        wait_queued();
        free_outgrown();
        free_buffer(buffer);
        error = buffer.allocate(&data, size);
      }
      check(error, buffer.allocation_name());
      if (buffer.data != nullptr) outgrown_.push_back(buffer);
      buffer.data = data;
      buffer.bytes = size;
      used = 0;
    }
    void* taken = static_cast<char*>(buffer.data) + used;
    used += align(bytes);
    return taken;
  }
  // Replaces `buffer` with one of `bytes` unless it holds that many: between executions (the
  // caller holds mutex_), when no queued work reads or writes it. Keeps it if none can be had.
  void reserve(GrowingBuffer& buffer, std::size_t bytes) {
    if (buffer.bytes >= bytes) return;
    void* data = nullptr;
    const cudaError_t error = buffer.allocate(&data, bytes);
    if (error == cudaErrorMemoryAllocation) cudaGetLastError();  // not a sticky error: clear it
    check(error, buffer.allocation_name());
    free_buffer(buffer);
    buffer.data = data;
    buffer.bytes = bytes;
  }
  // Frees the buffers that take() replaced; only once no queued work can touch them.
  void free_outgrown() noexcept {
    for (GrowingBuffer& buffer : outgrown_) free_buffer(buffer);
    outgrown_.clear();
  }
  void* take_staging(std::size_t bytes, Buffers& used) { return take(staging_, used.staging, bytes); }
  void* take_scratch(std::size_t bytes, Buffers& used) { return take(scratch_, used.scratch, bytes); }

  // Where a part's upload and chunk derivation go: prep_stream_ once a move is queued, so that
  // they run beside it; before that, stream_ itself, two calls (an event record and a wait) fewer
  // before the first move starts.
  cudaStream_t preparation_stream(const Buffers& used) const { return used.moving ? prep_stream_ : stream_; }

  // Makes stream_ wait until what is queued on prep_stream_ so far has run: a part's move starts
  // once its upload and chunks are ready, while the part before it may still be moving.
  void order_after_preparation(cudaStream_t preparation, Buffers& used) {
    if (preparation == stream_) return;
    if (used.parts == prepared_events_.size()) prepared_events_.push_back(make_event());
    const cudaEvent_t prepared = prepared_events_[used.parts++];
    check(cudaEventRecord(prepared, prep_stream_), "cudaEventRecord");
    check(cudaStreamWaitEvent(stream_, prepared, 0), "cudaStreamWaitEvent");
  }

  // Both streams idle: every part prepared and moved.
  void wait_queued() {
    check(cudaStreamSynchronize(prep_stream_), "compaction upload");
    check(cudaStreamSynchronize(stream_), "move kernel");
  }

  // The plan so far, given by next(more) until it clears `more` (at most `room` moves).
  using NextPart = std::function<gsl::span<const compactor::Move>(bool& more, const QueuedAhead& ahead)>;

  // Queues each new part of the plan as next() gives it, then calls `meanwhile` and waits. Room to
  // report a failed part is taken before any part runs: the report must not need host memory,
  // which may be what ran out. `last_threads` stage the last part (next() has cleared `more`);
  // `staged`: the caller wrote every move as a SlideMove there too (slide_chunk_bytes).
  ExecutionResult queue_parts(std::size_t room, gsl::span<const std::uint64_t> segment_bases,
                              compactor::ChunkPlan& scratch, const NextPart& next,
                              const std::function<void()>& meanwhile, const HostThreads* last_threads,
                              SlideMove* staged) {
    std::lock_guard lock(mutex_);
    std::size_t queued = 0;  // moves of the parts queued whole
    ExecutionResult result;
    result.reserve_failure(room);
    run_queued(
        [&](Buffers& used) {
          const QueuedAhead ahead = [&] { return queued_ahead(used); };
          for (bool more = true; more;) {
            gsl::span<const compactor::Move> moves = next(more, ahead);
            const auto part = moves.subspan(queued);
            if (part.empty()) continue;
            used.phases_launched = 0;
            try {
              if (moved_events_.size() == used.moved) moved_events_.push_back(make_event());  // before anything runs
              if (staged != nullptr) {
                queue_staged_slide(staged + queued, part.size(), used);
              } else if (!queue_slide(part, segment_bases, used, more ? nullptr : last_threads)) {
                while (more) moves = next(more, nothing_ahead());
                const auto rest = moves.subspan(queued);
                const MoveKernel kernel = kernel_for(rest);
                compactor::make_chunk_plan(rest, segment_bases, scratch, cuda_detail::chunk_limit(kernel));
                queue_plan(scratch, kernel, used);
              }
            } catch (const std::exception& error) {
              // The parts before this one are queued and will run, as will this part's phases that
              // were launched (a slide's one launch is its last step: it never fails after it). Unless
              // nothing ran, say which moves complete instead of throwing, so that the pool keeps
              // them. Take the rest of the plan, unrun.
              if (queued == 0 && used.phases_launched == 0) throw;
              result.fail(error.what(), moves.size(), queued);
              if (used.phases_launched != 0)
                compactor::moves_completed_by_phases(
                    scratch, used.phases_launched, gsl::span<std::uint8_t>(result.move_completed).subspan(queued));
              while (more) moves = next(more, nothing_ahead());
              result.move_completed.resize(moves.size(), 0);
              return;
            }
            queued = moves.size();
            if (cudaEventRecord(moved_events_[used.moved], stream_) == cudaSuccess) ++used.moved;
          }
        },
        meanwhile);
    return result;
  }

  // Whether the part before the last one queued is still moving: then the last waits behind it,
  // and a part given now would wait too (Device::QueuedAhead). Any error reads as idle.
  bool queued_ahead(const Buffers& used) const noexcept {
    return used.moved >= 2 && cudaEventQuery(moved_events_[used.moved - 2]) == cudaErrorNotReady;
  }

  cudaEvent_t make_event() {
    cudaEvent_t event = nullptr;
    check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreate");
    return event;
  }

  // Enqueues (queue), calls `meanwhile`, waits for stream_. On any failure, lets what was
  // enqueued finish before reporting: the pool must not hand the space out again while a kernel
  // may still write it. Which moves completed is then unknown; a launch failure or a kernel fault
  // is a sticky CUDA error, after which the context and every buffer in it are lost anyway.
  template <class Queue>
  void run_queued(Queue&& queue, const std::function<void()>& meanwhile) {
    try {
      check(cudaSetDevice(ordinal_), "cudaSetDevice");
      enqueue_pending_waits();
      Buffers used;
      queue(used);
      if (meanwhile) meanwhile();
      wait_queued();
      free_outgrown();
    } catch (...) {
      cudaStreamSynchronize(prep_stream_);
      cudaStreamSynchronize(stream_);
      free_outgrown();
      throw;
    }
  }

  // A move-kernel launch, or the failure VRAMKIT_CUDA_FAIL_MOVE_LAUNCH asks for: a test hook that
  // refuses the k-th launch of this device as a launch refused for its configuration would be (an
  // error that is not sticky), launching nothing.
  cudaError_t launch_move(MoveKernel kernel, const cuda_detail::DeviceChunk* chunks, std::uint32_t begin,
                          std::uint32_t end, unsigned* ticket, unsigned* read_flags) {
    if (begin < end && ++move_launches_ == fail_move_launch_at_) return cudaErrorLaunchOutOfResources;
    return cuda_detail::launch_move_chunks(kernel, chunks, begin, end, ticket, read_flags,
                                           move_blocks_[static_cast<int>(kernel)], stream_);
  }

  // queue_plan, but a launch failure after earlier phases were launched is a result (the moves
  // those phases run complete; the rest did not start) rather than an exception, which would tell
  // the pool that nothing moved. Other failures propagate: nothing had been launched.
  void queue_plan_or_report(const compactor::ChunkPlan& plan, MoveKernel kernel, std::size_t moves, Buffers& used,
                            ExecutionResult& result) {
    result.reserve_failure(moves);  // before anything runs: reporting then allocates nothing
    try {
      queue_plan(plan, kernel, used);
    } catch (const std::exception& error) {
      if (used.phases_launched == 0) throw;
      result.fail(error.what(), moves, 0);
      compactor::moves_completed_by_phases(plan, used.phases_launched, result.move_completed);
    }
  }

  // The kernel for these moves: the one the environment forced, else the warp form for small moves
  // (cuda_detail::automatic_move_kernel). One pass over the moves, which the planner just wrote.
  MoveKernel kernel_for(gsl::span<const compactor::Move> moves) const {
    if (forced_kernel_) return *forced_kernel_;
    std::uint64_t bytes = 0;
    for (const compactor::Move& move : moves) bytes += move.bytes;
    return cuda_detail::automatic_move_kernel(bytes, moves.size());
  }

  // Queues a slide's moves: upload, chunks made on the GPU, the move kernel. False (nothing
  // queued) if the moves are not a slide. The kernel is kernel_for's choice, made from the bytes
  // that the staging pass counts: the moves are staged with the warp form's chunks (the choice
  // for small moves, which are many) and, if the block form is chosen, chunked again in the staged
  // copy, which is a pass over fewer, larger moves still in the cache. On layout (b) the separate
  // pass of kernel_for cost 0.41 ms with the moves out of the cache (bench/lab/staging.cu).
  bool queue_slide(gsl::span<const compactor::Move> moves, gsl::span<const std::uint64_t> segment_bases,
                   Buffers& used, const HostThreads* threads) {
    const Buffers before = used;
    auto* staged = static_cast<SlideMove*>(take_staging(moves.size() * sizeof(SlideMove), used));
    std::size_t count = 0;
    std::uint64_t total = 0, bytes = 0;
    const MoveKernel staged_for = forced_kernel_.value_or(MoveKernel::warp);
    const std::uint32_t limit = cuda_detail::chunk_limit(staged_for);
    // Lent threads stage a large slide in parts (the pass costs about 6 ns a move on one thread,
    // docs/benchmarks.md run 51); below parallel_staging_min_moves waking them costs more.
    const unsigned parts = threads != nullptr && threads->run && moves.size() >= parallel_staging_min_moves
                               ? std::min(threads->count, compactor::detail::max_slide_parts)
                               : 1;
    const bool slide =
        parts > 1 ? compactor::detail::make_slide_moves_in_parts(moves, segment_bases, limit, staged, count, total,
                                                                 bytes, parts, threads->run)
                  : compactor::detail::make_slide_moves(moves, segment_bases, limit, staged, count, total, bytes);
    if (!slide) {
      used.staging = before.staging;
      return false;
    }
    const MoveKernel kernel = forced_kernel_.value_or(cuda_detail::automatic_move_kernel(bytes, moves.size()));
    if (kernel != staged_for) total = compactor::detail::rechunk_slide_moves(staged, count, cuda_detail::chunk_limit(kernel));
    queue_slide_moves(staged, count, 0, total, kernel, used);
    return true;
  }

  // Queues a part of a slide that the caller staged (slide_chunk_bytes): its first chunk is its first
  // move's, and its chunks end with its last move's. The kernel is chosen as kernel_for chooses,
  // but from the bytes rounded up to whole chunks (no pass over the part): for moves averaging
  // just under warp_mean_bytes it may take the block form where kernel_for would take the warp
  // form. A part that the block form moves is chunked again in place.
  void queue_staged_slide(SlideMove* staged, std::size_t count, Buffers& used) {
    const SlideMove& last = staged[count - 1];
    const std::uint32_t staged_limit = cuda_detail::chunk_limit(forced_kernel_.value_or(MoveKernel::warp));
    std::uint64_t first_ticket = staged[0].first_chunk;
    std::uint64_t total = last.first_chunk + compactor::detail::chunk_count(last.bytes, staged_limit) - first_ticket;
    const MoveKernel kernel =
        forced_kernel_.value_or(cuda_detail::automatic_move_kernel(total * staged_limit, count));
    if (cuda_detail::chunk_limit(kernel) != staged_limit) {
      total = compactor::detail::rechunk_slide_moves(staged, count, cuda_detail::chunk_limit(kernel));
      first_ticket = 0;
    }
    queue_slide_moves(staged, count, static_cast<std::uint32_t>(first_ticket), total, kernel, used);
  }

  // Uploads `count` slide moves (first chunks counting from first_ticket), derives their `total`
  // chunks on the GPU and launches `kernel` on them.
  void queue_slide_moves(const SlideMove* staged, std::size_t count, std::uint32_t first_ticket, std::uint64_t total,
                         MoveKernel kernel, Buffers& used) {
    if (total == 0) return;
    const std::size_t move_bytes = count * sizeof(SlideMove);
    const std::size_t chunk_bytes = std::size_t{total} * sizeof(cuda_detail::DeviceChunk);
    const std::size_t flag_bytes = (std::size_t{total} + 1) * sizeof(unsigned);
    auto* device_moves = static_cast<SlideMove*>(take_scratch(align(move_bytes) + align(chunk_bytes) + flag_bytes, used));
    auto* device_chunks = reinterpret_cast<cuda_detail::DeviceChunk*>(reinterpret_cast<char*>(device_moves) + align(move_bytes));
    auto* flags = reinterpret_cast<unsigned*>(reinterpret_cast<char*>(device_chunks) + align(chunk_bytes));
    const cudaStream_t preparation = preparation_stream(used);
    check(cudaMemcpyAsync(device_moves, staged, move_bytes, cudaMemcpyHostToDevice, preparation), "cudaMemcpyAsync");
    check(cuda_detail::launch_derive_slide_chunks(device_moves, static_cast<std::uint32_t>(count), first_ticket,
                                                  static_cast<std::uint32_t>(total), cuda_detail::chunk_limit(kernel),
                                                  device_chunks, flags, preparation),
          "chunk kernel launch");
    order_after_preparation(preparation, used);
    check(launch_move(kernel, device_chunks, 0, static_cast<std::uint32_t>(total), flags + total, flags),
          "move kernel launch");
    used.moving = true;
  }

  // Queues a chunk plan's phases, run by `kernel`, which must move every chunk of the plan whole
  // (each at most cuda_detail::chunk_limit(kernel) bytes: the limit the plan was split with, or
  // kernel_for_chunks for a caller's plan). used.phases_launched counts the phases launched, for a
  // failure part way.
  void queue_plan(const compactor::ChunkPlan& plan, MoveKernel kernel, Buffers& used) {
    used.phases_launched = 0;
    const std::size_t count = plan.chunks.size();
    if (count == 0) return;
    const std::size_t phases = plan.phases();
    const std::size_t chunk_bytes = count * sizeof(cuda_detail::DeviceChunk);
    const std::size_t flag_bytes = (count + phases) * sizeof(unsigned);
    // The flags go up zeroed with the chunks: one upload, no memset.
    const std::size_t upload_bytes = align(chunk_bytes) + flag_bytes;
    auto* staged = static_cast<char*>(take_staging(upload_bytes, used));
    std::memcpy(staged, plan.chunks.data(), chunk_bytes);
    std::memset(staged + chunk_bytes, 0, upload_bytes - chunk_bytes);  // the flags, and the padding before them
    auto* device_chunks = static_cast<cuda_detail::DeviceChunk*>(take_scratch(upload_bytes, used));
    auto* flags = reinterpret_cast<unsigned*>(reinterpret_cast<char*>(device_chunks) + align(chunk_bytes));
    const cudaStream_t preparation = preparation_stream(used);
    check(cudaMemcpyAsync(device_chunks, staged, upload_bytes, cudaMemcpyHostToDevice, preparation), "cudaMemcpyAsync");
    order_after_preparation(preparation, used);
    for (std::size_t phase = 0; phase < phases; ++phase) {
      check(launch_move(kernel, device_chunks, plan.phase_begin[phase], plan.phase_begin[phase + 1],
                        flags + count + phase, flags),
            "move kernel launch");
      ++used.phases_launched;
    }
    used.moving = true;
  }

  int ordinal_;
  std::string name_;
  int multiprocessors_ = 0;
  /// VRAMKIT_MOVE_KERNEL=block|warp forces a kernel; unset or auto: kernel_for chooses.
  std::optional<MoveKernel> forced_kernel_;
  unsigned move_blocks_[2] = {0, 0};        ///< Grid of each kernel, indexed by MoveKernel.
  std::uint64_t move_launches_ = 0;         ///< Move-kernel launches so far (launch_move).
  std::uint64_t fail_move_launch_at_ = 0;   ///< VRAMKIT_CUDA_FAIL_MOVE_LAUNCH; 0: none.
  std::uint64_t growths_ = 0;               ///< Staging and scratch growths so far (take).
  std::uint64_t fail_growth_at_ = 0;        ///< VRAMKIT_CUDA_FAIL_BUFFER_GROWTH; 0: none.
  cudaStream_t stream_ = nullptr;       ///< Moves (and waits for the streams of pinned buffers).
  cudaStream_t prep_stream_ = nullptr;  ///< Uploads and chunk derivation for the moves.
  std::mutex mutex_;
  std::unordered_map<UseToken, cudaEvent_t> events_;
  std::vector<cudaEvent_t> spare_events_;
  std::vector<cudaEvent_t> pending_waits_;
  std::vector<cudaEvent_t> retired_events_;  ///< Forgotten while a wait on them was pending.
  UseToken last_token_ = 0;
  std::vector<cudaEvent_t> prepared_events_;  ///< One a part: its preparation is done (order_after_preparation).
  std::vector<cudaEvent_t> moved_events_;     ///< One a part: its move is done (queued_ahead).
  GrowingBuffer staging_{.host = true};
  GrowingBuffer scratch_{.host = false};
  std::vector<GrowingBuffer> outgrown_;  ///< Replaced by take() during the execution under way.
};

}  // namespace

bool cuda_available() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return false;
  }
  return count > 0;
}

std::shared_ptr<Device> make_cuda_device(int ordinal) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess || count == 0) {
    cudaGetLastError();
    throw device_error(detail::message("no CUDA device available (", cudaGetErrorName(status), ", ", count,
                                       " devices); use the host device"));
  }
  if (ordinal < 0 || ordinal >= count) {
    throw invalid_argument(detail::message("CUDA device ", ordinal, " requested; this machine has ", count));
  }
  return std::make_shared<CudaDevice>(ordinal);
}

}  // namespace vramkit
