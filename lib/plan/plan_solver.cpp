// Offset assignment for a memory plan (dynamic storage allocation over stage intervals).
//
// Two buffers conflict when their stage ranges intersect; conflicting buffers need disjoint byte
// ranges. Minimising the peak is NP-hard in general, so this is a heuristic search with a proven
// floor: the heaviest stage's live bytes (no placement can need less), and a stop as soon as a
// placement reaches it.
//
// One greedy pass (as TFLite's arena planner): take buffers in some order; put each at the lowest
// (first fit) or the tightest (best fit) aligned gap left by the already placed buffers it
// conflicts with, or on top of them. Placed buffers are kept sorted by offset, so a pass scans at
// most the placed ones per buffer: O(n^2) per pass at worst, far less for first fit, which stops at
// the first gap. A pass gives up as soon as its peak reaches the best one found (it cannot win).
//
// Passes: five fixed orders (six with mixed alignments) x the enabled gap choices, then perturbations
// of the best order (the buffer that sets the peak moved to the front, and seeded nearby swaps at or
// before it; the unchanged prefix is replayed from the best placement, not searched again). The random
// generator is std::mt19937_64, whose sequence the standard fixes, and every sort breaks ties by index, so
// the result depends on nothing but the plan and the options.
#include <vramkit/detail/bits.hpp>
#include <vramkit/detail/message.hpp>
#include <vramkit/errors.hpp>
#include <vramkit/memory_plan.hpp>

#include <algorithm>
#include <optional>
#include <random>

#include <gsl/assert>

namespace vramkit {
namespace {

using detail::align_up;

enum class Gap { first_fit, best_fit };

const char* gap_name(Gap gap) {
  return gap == Gap::first_fit ? "first fit" : "best fit";
}

// What a pass needs of a buffer, packed for the scan.
struct Item {
  std::uint64_t bytes = 0;  // reserved bytes: a multiple of alignment
  std::uint64_t alignment = 1;
  std::uint32_t first = 0;
  std::uint32_t last = 0;
};

struct Placed {
  std::uint64_t offset;
  std::uint64_t end;
  std::uint32_t first;
  std::uint32_t last;
};

// Runs greedy passes over one set of items; reuses its storage between passes.
class Packer {
 public:
  explicit Packer(const std::vector<Item>& items) : items_(items), offsets_(items.size()) {
    placed_.reserve(items.size());
  }

  // Places the items in `order`. Returns the peak, or nullopt as soon as it reaches give_up_at.
  // The first `kept` items of `order` go straight to `kept_offsets` (a pass with the same prefix
  // placed them there), which costs a sort instead of a scan per item.
  std::optional<std::uint64_t> pack(const std::vector<std::uint32_t>& order, Gap gap,
                                    std::uint64_t give_up_at, std::size_t kept = 0,
                                    const std::vector<std::uint64_t>* kept_offsets = nullptr) {
    placed_.clear();
    std::uint64_t peak = 0;
    for (std::size_t position = 0; position < kept; ++position) {
      const std::uint32_t index = order[position];
      const Item& item = items_[index];
      const std::uint64_t offset = (*kept_offsets)[index];
      offsets_[index] = offset;
      peak = std::max(peak, offset + item.bytes);
      placed_.push_back(Placed{offset, offset + item.bytes, item.first, item.last});
    }
    if (peak >= give_up_at) return std::nullopt;
    std::sort(placed_.begin(), placed_.end(),
              [](const Placed& a, const Placed& b) { return a.offset < b.offset; });
    for (std::size_t position = kept; position < order.size(); ++position) {
      const std::uint32_t index = order[position];
      const Item& item = items_[index];
      const std::uint64_t offset = gap == Gap::first_fit ? first_fit(item) : best_fit(item);
      const std::uint64_t end = offset + item.bytes;
      offsets_[index] = offset;
      peak = std::max(peak, end);
      if (peak >= give_up_at) return std::nullopt;
      const auto where =
          std::upper_bound(placed_.begin(), placed_.end(), offset,
                           [](std::uint64_t value, const Placed& p) { return value < p.offset; });
      placed_.insert(where, Placed{offset, end, item.first, item.last});
    }
    return peak;
  }

  const std::vector<std::uint64_t>& offsets() const { return offsets_; }
  // Placed buffers looked at so far, over all passes: the measure of work that bounds the search.
  std::uint64_t visits() const { return visits_; }

 private:
  static bool conflicts(const Placed& placed, const Item& item) {
    return placed.first <= item.last && item.first <= placed.last;
  }

  // The lowest aligned offset free of every conflicting placed buffer. `candidate` is the lowest
  // offset above all conflicting buffers seen so far; since they come in offset order, the first
  // one starting at or above candidate + bytes proves the gap below it is free.
  std::uint64_t first_fit(const Item& item) {
    std::uint64_t candidate = 0;
    for (std::size_t i = 0; i < placed_.size(); ++i) {
      const Placed& placed = placed_[i];
      if (!conflicts(placed, item)) continue;
      if (placed.offset >= candidate + item.bytes) {
        visits_ += i;
        return candidate;
      }
      candidate = std::max(candidate, align_up(placed.end, item.alignment));
    }
    visits_ += placed_.size();
    return candidate;
  }

  // The start of the smallest gap that holds the item (lowest on ties), else the top.
  std::uint64_t best_fit(const Item& item) {
    std::uint64_t candidate = 0;
    std::uint64_t best = UINT64_MAX;
    std::uint64_t best_gap = UINT64_MAX;
    for (std::size_t i = 0; i < placed_.size(); ++i) {
      const Placed& placed = placed_[i];
      if (!conflicts(placed, item)) continue;
      if (placed.offset >= candidate + item.bytes) {
        const std::uint64_t gap = placed.offset - candidate;
        if (gap < best_gap) {
          best_gap = gap;
          best = candidate;
          if (gap == item.bytes) {  // nothing can fit tighter
            visits_ += i;
            return best;
          }
        }
      }
      candidate = std::max(candidate, align_up(placed.end, item.alignment));
    }
    visits_ += placed_.size();
    return best == UINT64_MAX ? candidate : best;
  }

  const std::vector<Item>& items_;
  std::vector<Placed> placed_;  // sorted by offset
  std::vector<std::uint64_t> offsets_;
  std::uint64_t visits_ = 0;
};

struct NamedOrder {
  const char* name;
  std::vector<std::uint32_t> order;
};

std::vector<std::uint32_t> identity(std::size_t count) {
  std::vector<std::uint32_t> order(count);
  for (std::size_t i = 0; i < count; ++i) order[i] = static_cast<std::uint32_t>(i);
  return order;
}

// Sorts indices by `before`, ties by index, so every order is a strict total order.
template <class Before>
std::vector<std::uint32_t> sorted(std::size_t count, Before before) {
  std::vector<std::uint32_t> order = identity(count);
  std::sort(order.begin(), order.end(), [&](std::uint32_t a, std::uint32_t b) {
    if (before(a, b)) return true;
    if (before(b, a)) return false;
    return a < b;
  });
  return order;
}

std::vector<NamedOrder> fixed_orders(const std::vector<Item>& items,
                                     const std::vector<std::uint64_t>& stage_bytes) {
  const auto length = [&](std::uint32_t i) { return std::uint64_t{items[i].last} - items[i].first + 1; };
  std::vector<NamedOrder> orders;
  orders.reserve(6);  // breadth reads the size order in place
  orders.push_back({"size", sorted(items.size(), [&](std::uint32_t a, std::uint32_t b) {
                      if (items[a].bytes != items[b].bytes) return items[a].bytes > items[b].bytes;
                      return length(a) > length(b);
                    })});
  orders.push_back({"lifetime", sorted(items.size(), [&](std::uint32_t a, std::uint32_t b) {
                      if (length(a) != length(b)) return length(a) > length(b);
                      return items[a].bytes > items[b].bytes;
                    })});
  orders.push_back({"size x lifetime", sorted(items.size(), [&](std::uint32_t a, std::uint32_t b) {
                      const double area_a =
                          static_cast<double>(items[a].bytes) * static_cast<double>(length(a));
                      const double area_b =
                          static_cast<double>(items[b].bytes) * static_cast<double>(length(b));
                      if (area_a != area_b) return area_a > area_b;
                      return items[a].bytes > items[b].bytes;
                    })});
  orders.push_back({"first stage", sorted(items.size(), [&](std::uint32_t a, std::uint32_t b) {
                      if (items[a].first != items[b].first) return items[a].first < items[b].first;
                      return items[a].bytes > items[b].bytes;
                    })});

  // Largest alignment first: with mixed alignments, the order that packs one stage without padding.
  const bool mixed_alignments = std::any_of(items.begin(), items.end(), [&](const Item& item) {
    return item.alignment != items.front().alignment;
  });
  if (mixed_alignments) {
    orders.push_back({"alignment", sorted(items.size(), [&](std::uint32_t a, std::uint32_t b) {
                        if (items[a].alignment != items[b].alignment)
                          return items[a].alignment > items[b].alignment;
                        return items[a].bytes > items[b].bytes;
                      })});
  }

  // Breadth: the heaviest stage's buffers first (largest first), then the next heaviest stage's.
  const std::vector<std::uint32_t>& by_size = orders.front().order;
  const std::vector<std::uint32_t> stages_by_load = sorted(
      stage_bytes.size(), [&](std::uint32_t a, std::uint32_t b) { return stage_bytes[a] > stage_bytes[b]; });
  std::vector<std::uint32_t> breadth;
  breadth.reserve(items.size());
  std::vector<bool> taken(items.size(), false);
  for (const std::uint32_t stage : stages_by_load) {
    if (breadth.size() == items.size()) break;
    for (const std::uint32_t index : by_size) {
      if (!taken[index] && items[index].first <= stage && stage <= items[index].last) {
        taken[index] = true;
        breadth.push_back(index);
      }
    }
  }
  orders.push_back({"breadth", std::move(breadth)});
  return orders;
}

// Swaps the item at a random position up to `last` with one a little after it (nearby swaps change
// a greedy result a little, which is what a local search wants). Returns the lower position.
std::size_t swap_nearby(std::vector<std::uint32_t>& order, std::size_t last, std::mt19937_64& random) {
  const std::size_t first = random() % (last + 1);
  std::size_t second = std::min(order.size() - 1, first + 1 + random() % 8);
  if (second == first) second = first - 1;  // first is the last position; order has two items or more
  std::swap(order[first], order[second]);
  return std::min(first, second);
}

}  // namespace

bool PlanSolution::live_in(std::size_t buffer, std::size_t stage) const {
  if (buffer >= buffers.size()) {
    throw invalid_argument(detail::message("buffer index ", buffer, " is out of range; the plan has ",
                                           buffers.size(), " buffers"));
  }
  if (stage >= stages.size()) {
    throw invalid_argument(
        detail::message("stage index ", stage, " is out of range; the plan has ", stages.size(), " stages"));
  }
  return buffers[buffer].first_stage <= stage && stage <= buffers[buffer].last_stage;
}

PlanSolution solve(const MemoryPlan& plan, const SolveOptions& options) {
  if (!options.first_fit && !options.best_fit) {
    throw invalid_argument("SolveOptions: first_fit and best_fit are both off; enable at least one");
  }
  const std::vector<PlannedBuffer>& declared = plan.buffers();
  const std::size_t stage_count = plan.stages().size();
  if (declared.size() > UINT32_MAX) {
    throw invalid_argument(
        detail::message("solve() takes at most ", UINT32_MAX, " buffers; the plan has ", declared.size()));
  }

  std::vector<Item> items(declared.size());
  std::vector<std::uint64_t> stage_bytes(stage_count, 0);
  std::vector<std::size_t> stage_buffers(stage_count, 0);
  PlanSolution solution;
  for (std::size_t i = 0; i < declared.size(); ++i) {
    const PlannedBuffer& buffer = declared[i];
    items[i] = {buffer.reserved_bytes, buffer.alignment, buffer.first_stage, buffer.last_stage};
    for (std::uint32_t stage = buffer.first_stage; stage <= buffer.last_stage; ++stage) {
      stage_bytes[stage] += buffer.reserved_bytes;
      ++stage_buffers[stage];
    }
    solution.region_alignment = std::max(solution.region_alignment, buffer.alignment);
  }
  solution.lower_bound_bytes =
      stage_count == 0 ? 0 : *std::max_element(stage_bytes.begin(), stage_bytes.end());

  std::vector<std::uint64_t> best_offsets(items.size(), 0);
  std::uint64_t best_peak = items.empty() ? 0 : UINT64_MAX;
  solution.strategy = "no buffers";
  if (!items.empty()) {
    Packer packer(items);
    std::vector<Gap> gaps;
    if (options.best_fit) gaps.push_back(Gap::best_fit);
    if (options.first_fit) gaps.push_back(Gap::first_fit);
    std::vector<std::uint32_t> best_order;
    Gap best_gap = gaps.front();
    const auto try_order = [&](const std::vector<std::uint32_t>& order, Gap gap, std::size_t kept) {
      if (best_peak == solution.lower_bound_bytes) return false;
      const std::optional<std::uint64_t> peak = packer.pack(order, gap, best_peak, kept, &best_offsets);
      if (!peak) return false;
      best_peak = *peak;
      best_offsets = packer.offsets();
      best_order = order;
      best_gap = gap;
      return true;
    };

    for (const NamedOrder& named : fixed_orders(items, stage_bytes)) {
      for (const Gap gap : gaps) {
        if (try_order(named.order, gap, 0))
          solution.strategy = detail::message(named.name, ", ", gap_name(gap));
      }
    }

    // Local search around the best order. Only a change at or before the first buffer that reaches
    // the peak can lower it, so changes go there, and the unchanged prefix is replayed, not solved.
    std::mt19937_64 random(options.seed);
    bool promote = true;  // once per new best: move the buffer that sets the peak to the front
    const std::string base_strategy = solution.strategy;
    const std::uint64_t work_limit = packer.visits() + options.perturbation_visits;
    for (std::uint32_t round = 1; round <= options.perturbations; ++round) {
      if (best_peak == solution.lower_bound_bytes || packer.visits() >= work_limit) break;
      const std::size_t top = static_cast<std::size_t>(
          std::find_if(best_order.begin(), best_order.end(),
                       [&](std::uint32_t i) { return best_offsets[i] + items[i].bytes == best_peak; }) -
          best_order.begin());
      std::vector<std::uint32_t> order = best_order;
      std::size_t kept = top;
      if (promote && top > 0) {
        std::rotate(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top),
                    order.begin() + static_cast<std::ptrdiff_t>(top) + 1);
        kept = 0;
      } else {
        const std::uint64_t swaps = 1 + random() % 3;
        for (std::uint64_t swap = 0; swap < swaps; ++swap)
          kept = std::min(kept, swap_nearby(order, top, random));
      }
      promote = false;
      if (try_order(order, best_gap, kept)) {
        solution.strategy = detail::message(base_strategy, ", perturbation ", round);
        promote = true;
      }
    }
  }

  solution.peak_bytes = best_peak;
  solution.buffers.reserve(declared.size());
  solution.stages.resize(stage_count);
  for (std::size_t stage = 0; stage < stage_count; ++stage) {
    solution.stages[stage].name = plan.stages()[stage];
    solution.stages[stage].live_buffers = stage_buffers[stage];
    solution.stages[stage].live_bytes = stage_bytes[stage];
  }
  for (std::size_t i = 0; i < declared.size(); ++i) {
    const PlannedBuffer& buffer = declared[i];
    solution.buffers.push_back({.name = buffer.name,
                                .offset = best_offsets[i],
                                .bytes = buffer.bytes,
                                .reserved_bytes = buffer.reserved_bytes,
                                .alignment = buffer.alignment,
                                .first_stage = buffer.first_stage,
                                .last_stage = buffer.last_stage});
    const std::uint64_t end = best_offsets[i] + buffer.reserved_bytes;
    for (std::uint32_t stage = buffer.first_stage; stage <= buffer.last_stage; ++stage) {
      solution.stages[stage].high_water_bytes = std::max(solution.stages[stage].high_water_bytes, end);
    }
  }
  Ensures(solution.peak_bytes >= solution.lower_bound_bytes);
  return solution;
}

}  // namespace vramkit
