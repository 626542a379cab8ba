#pragma once
// Stage memory plans: pure host code, declared up front.
//
// A pipeline runs its stages in a fixed order. Each buffer it needs is live from a first to a last
// stage. A MemoryPlan records those buffers; solve() gives each an offset inside one region so that
// buffers live in a common stage never share a byte, keeping the region (the peak) small;
// check_fit() says whether a pool can provide that region and, if not, which stage is short by how
// much; to_text() and to_svg() show the result per stage.
//
//   MemoryPlan plan({"decode", "blur", "edges", "write"});
//   plan.add_image<std::uint8_t>("rgb", 1920, 1080, 3, "decode", "blur");
//   plan.add_buffer({.name = "gray", .bytes = 2_MiB, .first_stage = "decode", .last_stage = "edges"});
//   const PlanSolution solution = solve(plan);
//   if (!check_fit(solution, pool_free_bytes).fits) ...
//
// The seam to the pool: a solution is a list of (buffer, offset, bytes) inside [0, peak_bytes). A
// region whose base is aligned to region_alignment holds every buffer at base + offset.
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace vramkit {

/// A buffer to declare: its size in bytes and the stages (by name, inclusive) in which it is live.
struct BufferSpec {
  std::string name;
  std::uint64_t bytes = 0;
  std::string first_stage;
  std::string last_stage;
  std::uint64_t alignment = 256;  ///< Power of two; the buffer's offset is a multiple of it.
};

/// The shape of a buffer declared by add_image(): `height` rows of `pitch_bytes` each, of which the
/// first width x channels x element_bytes are pixels. pitch_bytes is a multiple of the alignment.
struct ImageLayout {
  std::uint64_t width = 0;
  std::uint64_t height = 0;
  std::uint64_t channels = 0;
  std::uint64_t element_bytes = 0;
  std::uint64_t pitch_bytes = 0;
};

/// A declared buffer as the plan stores it. Invariants: 0 < bytes <= reserved_bytes, reserved_bytes
/// is bytes rounded up to alignment (a power of two), first_stage <= last_stage < stage count.
struct PlannedBuffer {
  std::string name;
  std::uint64_t bytes = 0;
  std::uint64_t reserved_bytes = 0;  ///< What the solver keeps clear for it: bytes rounded up.
  std::uint64_t alignment = 0;
  std::uint32_t first_stage = 0;  ///< Stage indices, inclusive.
  std::uint32_t last_stage = 0;
  std::optional<ImageLayout> image;  ///< Set by add_image().
};

/// Stages in order and the buffers declared over them.
///
/// Invariants: stage names are non-empty and distinct; buffer names are non-empty and distinct;
/// the sum of all reserved_bytes is at most max_total_bytes (so no offset or peak can overflow).
/// Every add either succeeds or throws vramkit::invalid_argument and leaves the plan unchanged.
class MemoryPlan {
 public:
  static constexpr std::uint64_t default_alignment = 256;
  /// The most bytes one plan may declare in all (4 EiB): any peak then fits in 63 bits.
  static constexpr std::uint64_t max_total_bytes = std::uint64_t{1} << 62;

  /// Stages in the order they run. Throws invalid_argument on no stages, an empty or a repeated name.
  explicit MemoryPlan(std::vector<std::string> stage_names);

  /// Declares a buffer; returns its index (buffers are numbered 0, 1, ... in declaration order).
  /// Throws invalid_argument on an empty or repeated name, an unknown stage, a last stage before the
  /// first, zero bytes, an alignment that is not a power of two, or a size past max_total_bytes.
  std::size_t add_buffer(const BufferSpec& spec);

  /// Declares `count` elements of T, aligned to at least alignof(T).
  template <class T>
  std::size_t add_array(std::string name, std::uint64_t count, std::string first_stage,
                        std::string last_stage, std::uint64_t alignment = default_alignment) {
    const std::uint64_t raised = at_least(name, alignment, alignof(T));
    return add_elements(std::move(name), count, sizeof(T), std::move(first_stage), std::move(last_stage), raised);
  }

  /// Declares a width x height image of `channels` T per pixel, each row padded to a multiple of the
  /// alignment (the pitch); buffers()[index].image records the layout.
  template <class T>
  std::size_t add_image(std::string name, std::uint64_t width, std::uint64_t height, std::uint64_t channels,
                        std::string first_stage, std::string last_stage,
                        std::uint64_t alignment = default_alignment) {
    const std::uint64_t raised = at_least(name, alignment, alignof(T));
    return add_pixels(std::move(name), width, height, channels, sizeof(T), std::move(first_stage),
                      std::move(last_stage), raised);
  }

  const std::vector<std::string>& stages() const { return stage_names_; }
  const std::vector<PlannedBuffer>& buffers() const { return buffers_; }
  /// The sum of every buffer's reserved_bytes.
  std::uint64_t total_reserved_bytes() const { return total_reserved_bytes_; }

  /// Index of a stage or buffer by name; throws invalid_argument when there is none.
  std::size_t stage_index(std::string_view stage_name) const;
  std::size_t buffer_index(std::string_view buffer_name) const;

  /// The requested alignment raised to `minimum` (alignof(T)); throws invalid_argument naming the
  /// buffer when the request itself is 0 or not a power of two, whatever T is.
  static std::uint64_t at_least(std::string_view buffer_name, std::uint64_t alignment, std::uint64_t minimum);
  /// Non-template bodies of add_array() and add_image().
  std::size_t add_elements(std::string name, std::uint64_t count, std::uint64_t element_bytes,
                           std::string first_stage, std::string last_stage, std::uint64_t alignment);
  std::size_t add_pixels(std::string name, std::uint64_t width, std::uint64_t height, std::uint64_t channels,
                         std::uint64_t element_bytes, std::string first_stage, std::string last_stage,
                         std::uint64_t alignment);

 private:
  std::size_t add_checked(PlannedBuffer buffer);
  std::uint32_t stage_for(std::string_view buffer_name, std::string_view stage_name) const;

  std::vector<std::string> stage_names_;
  std::map<std::string, std::uint32_t, std::less<>> stage_by_name_;
  std::vector<PlannedBuffer> buffers_;
  std::map<std::string, std::size_t, std::less<>> buffer_by_name_;
  std::uint64_t total_reserved_bytes_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Solving

/// How solve() searches. Every setting keeps the result deterministic for the same plan.
struct SolveOptions {
  /// Perturbations of the best order tried after the fixed orders (seeded random swaps, and moving
  /// the buffer that sets the peak to the front). 0 tries only the fixed orders.
  std::uint32_t perturbations = 24;
  /// Work limit of the perturbations, in placed buffers looked at (a placement looks at up to all
  /// buffers placed before it): a deterministic stand-in for a time limit. Small plans never reach
  /// it; for 1,000 buffers it allows about 1 ms of search on a 2-core x86 machine.
  std::uint64_t perturbation_visits = 500'000;
  std::uint64_t seed = 0x5eed;
  /// Gap choices to try: the lowest gap that fits, and the smallest gap that fits. At least one.
  bool first_fit = true;
  bool best_fit = true;
};

/// Where one buffer lives: [offset, offset + reserved_bytes) of the plan's region is its own in
/// every stage from first_stage to last_stage. offset is a multiple of alignment.
struct PlacedBuffer {
  std::string name;
  std::uint64_t offset = 0;
  std::uint64_t bytes = 0;  ///< As declared.
  std::uint64_t reserved_bytes = 0;
  std::uint64_t alignment = 0;
  std::uint32_t first_stage = 0;
  std::uint32_t last_stage = 0;
};

/// One stage as a solution uses it.
struct StageUsage {
  std::string name;
  std::size_t live_buffers = 0;
  std::uint64_t live_bytes = 0;        ///< Sum of reserved_bytes of the buffers live in this stage.
  std::uint64_t high_water_bytes = 0;  ///< Highest end (offset + reserved_bytes) of those buffers.
};

/// The result of solve(). Invariants: buffers[i] is the plan's buffer i; two buffers whose stage
/// ranges intersect have disjoint byte ranges; every end is at most peak_bytes; lower_bound_bytes =
/// max over stages of live_bytes <= peak_bytes = max over stages of high_water_bytes.
struct PlanSolution {
  std::vector<PlacedBuffer> buffers;
  std::vector<StageUsage> stages;
  std::uint64_t peak_bytes = 0;         ///< The region size the plan needs.
  std::uint64_t lower_bound_bytes = 0;  ///< No placement can need less: the heaviest stage's bytes.
  std::uint64_t region_alignment = 1;   ///< The largest buffer alignment: the region base's alignment.
  std::string strategy;                 ///< The order and gap choice that won, e.g. "size, best fit".

  /// Whether buffer `buffer` is live in stage `stage` (the arena's debug-build lifetime check).
  /// Throws invalid_argument on an index out of range.
  bool live_in(std::size_t buffer, std::size_t stage) const;
};

/// Assigns every buffer an offset. Greedy placement (each buffer at the lowest, or the tightest,
/// aligned gap among already placed buffers it shares a stage with) over several orders: by size,
/// by lifetime, by size x lifetime, by first stage, by heaviest stage ("breadth"), by alignment
/// (when alignments differ), then seeded
/// perturbations of the best; the smallest peak wins, and the search stops early at the lower bound.
/// Cost: O(orders x n x k) with k the placed buffers scanned per placement (n^2 / 2 at worst).
PlanSolution solve(const MemoryPlan& plan, const SolveOptions& options = {});

// ---------------------------------------------------------------------------------------------
// Fit check and reports

/// One stage against the bytes available.
struct StageFit {
  std::string name;
  std::uint64_t high_water_bytes = 0;
  std::uint64_t shortfall_bytes = 0;  ///< high_water_bytes - available, or 0 when it fits.
};

/// Whether a solution fits in `available_bytes`; if not, the stage reaching highest beyond them.
struct FitReport {
  bool fits = false;
  std::uint64_t available_bytes = 0;
  std::uint64_t needed_bytes = 0;          ///< The solution's peak.
  std::uint64_t shortfall_bytes = 0;       ///< needed - available, or 0 when it fits.
  std::optional<std::size_t> worst_stage;  ///< Set when it does not fit: the first stage reaching the peak.
  std::vector<StageFit> stages;
};

/// Checks a solution against the bytes a pool can provide (one region of that many bytes).
FitReport check_fit(const PlanSolution& solution, std::uint64_t available_bytes);

/// A per-stage table (stage, live buffers, live bytes, high-water) and a line with peak, lower
/// bound and strategy.
std::string to_text(const PlanSolution& solution);
/// One line on fitting or not, then each stage's high-water and shortfall.
std::string to_text(const FitReport& report);

/// An SVG diagram: stages across, offsets up, one <rect class="buffer"> per buffer (titled with its
/// name and bytes), a dashed lower-bound line, and a title with peak vs lower bound. Names are
/// XML-escaped. Throws invalid_argument when the solution is not the plan's.
std::string to_svg(const MemoryPlan& plan, const PlanSolution& solution);

}  // namespace vramkit
