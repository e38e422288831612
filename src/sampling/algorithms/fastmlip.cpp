// SPDX-License-Identifier: MIT
// fastmlip: our packer. The goals, in the order they shape the algorithm:
//
// 1. Fewest bins. Any plan needs ceil(T / C) bins for total size T, and a multiple of W; so
//    we aim for exactly B = ceil(T / C) rounded up to a multiple of W (less the bins that
//    oversize graphs take alone). Padding is then the least any valid plan can have.
// 2. Equal loads. With B fixed this is the scheduling problem P||Cmax, and the greedy
//    "largest graph first, into the least-loaded bin" (LPT, Graham 1969) leaves a spread no
//    larger than the last graphs placed, which are the smallest. A bounded local search then
//    pairs the k-th heaviest bin with the k-th lightest and makes the single swap (or move)
//    between them that best halves their difference, for a few passes.
// 3. Capacity. LPT keeps the least-loaded bin at or below the mean, so it only runs out of room
//    when the slack B C - T is so small that every bin is within one tail graph of the capacity;
//    balance is then settled, and the remaining (small) graphs go best-fit to fill the gaps
//    exactly. If even that fails, first fit on the same order gives the bin count (often still
//    the least possible: first fit excels at filling bins exactly); LPT is retried with that
//    count if it is larger, and otherwise first fit's bins are kept and balanced by more swap
//    passes.
// 4. Randomness per epoch. Graphs whose sizes are within tie_tolerance of each other (a class
//    of the descending order) are interchangeable for LPT, so each epoch shuffles within every
//    class: the bins get different members while their loads stay as balanced. Steps are then
//    formed from bins of similar load (sorted, W at a time) and both the step order and the
//    rank each bin of a step goes to are shuffled per epoch.
// 5. Same steps per rank: B is a multiple of W by construction.
// Cost: counting sort O(N + C) (std::stable_sort beyond that), LPT O(N + C) with a bucket
// queue (O(N log B) with a heap for huge capacities), local search O(N log N) per pass,
// arrangement O(B log B). Every random draw comes from stream_seed(seed, epoch, ...), so each
// rank computes the same plan alone.
#include <algorithm>
#include <string>

#include "sampling/impl/packers.hpp"

namespace fastmlip::sampling::impl {
namespace {

// Sizes descending, ties by index; counting sort when the size range is small.
std::vector<std::int64_t> sort_descending(const PackInput& in) {
  std::vector<std::int64_t> order(in.regular.size());
  const std::int64_t range = in.regular_max + 1;
  if (range <= std::max<std::int64_t>(1 << 20, 4 * static_cast<std::int64_t>(order.size()))) {
    std::vector<std::int64_t> start(static_cast<std::size_t>(range) + 1, 0);
    for (std::int64_t g : in.regular) {
      ++start[in.regular_max - in.sizes[g] + 1];
    }
    for (std::int64_t k = 0; k < range; ++k) {
      start[k + 1] += start[k];
    }
    for (std::int64_t g : in.regular) {
      order[start[in.regular_max - in.sizes[g]]++] = g;
    }
  } else {
    order = in.regular;
    std::stable_sort(order.begin(), order.end(),
                     [&](std::int64_t a, std::int64_t b) { return in.sizes[a] > in.sizes[b]; });
  }
  return order;
}

// Shuffles each run of the descending order whose sizes lie within [s (1 - tol), s] of the
// run's first (largest) size s.
void shuffle_tie_classes(std::vector<std::int64_t>& order, const PackInput& in, Rng& rng) {
  const double tol = in.params.tie_tolerance;
  std::size_t a = 0;
  while (a < order.size()) {
    const std::int64_t top = in.sizes[order[a]];
    const std::int64_t floor_size = top - static_cast<std::int64_t>(tol * static_cast<double>(top));
    std::size_t b = a + 1;
    while (b < order.size() && in.sizes[order[b]] >= floor_size) {
      ++b;
    }
    rng.shuffle(order.begin() + static_cast<std::ptrdiff_t>(a),
                order.begin() + static_cast<std::ptrdiff_t>(b));
    a = b;
  }
}

// Capacities up to this many size units use the bucket queue (one list head per load value);
// larger ones, e.g. weighted sizes in big units, the binary heap.
constexpr std::int64_t kBucketLimit = std::int64_t{1} << 21;

// LPT with a bucket queue. Loads are integers in [0, C] and the least load never decreases
// under LPT (only the least-loaded bin grows), so a pointer sweeping the buckets upwards finds
// it in O(1) amortised: O(N + C) in all.
//
// The tail: when the least-loaded bin cannot take the next graph, every bin is within that
// graph's size of the capacity, so balance is settled and what remains is filling gaps exactly.
// The rest then go best-fit (into the fullest bin that still holds them), found by scanning a
// bitset of non-empty load values downwards from C - s.
//
// With a very tight bin count (a slack of a fraction of a size unit per bin) LPT spreads the
// little room left so evenly that no gap holds the tail graphs. For that case the state is
// saved at the first graph where the mean room per bin drops below twice its size (and below
// C/16, so that graphs nearly as large as a bin, which make the first test true from the
// start, do not count: the end game is meant); if the tail fails, best-fit restarts from there. That
// concentrates the room where it is needed, as first-fit decreasing does, at the cost of a spread of a few of
// the smallest graphs' sizes. False if some graph fits nowhere either way.
bool least_loaded_buckets(const std::vector<std::int64_t>& order, const PackInput& in, std::int64_t nbins,
                          std::vector<std::int64_t>& bin_of, std::vector<std::int64_t>& load) {
  const std::int64_t cap = in.params.capacity;
  struct State {
    std::vector<std::int64_t> head, next, load;
    std::vector<std::uint64_t> nonempty;
  };
  State st{std::vector<std::int64_t>(static_cast<std::size_t>(cap) + 1, -1),
           std::vector<std::int64_t>(static_cast<std::size_t>(nbins)),
           std::vector<std::int64_t>(static_cast<std::size_t>(nbins), 0),
           std::vector<std::uint64_t>(static_cast<std::size_t>(cap) / 64 + 1, 0)};
  auto push = [&](std::int64_t b, std::int64_t l) {
    st.next[b] = st.head[l];
    st.head[l] = b;
    st.nonempty[l >> 6] |= std::uint64_t{1} << (l & 63);
  };
  auto pop = [&](std::int64_t l) {
    const std::int64_t b = st.head[l];
    st.head[l] = st.next[b];
    if (st.head[l] < 0) {
      st.nonempty[l >> 6] &= ~(std::uint64_t{1} << (l & 63));
    }
    return b;
  };
  auto place = [&](std::int64_t g, std::int64_t l) {
    const std::int64_t b = pop(l);
    bin_of[g] = b;
    st.load[b] = l + in.sizes[g];
    push(b, l + in.sizes[g]);
  };
  // Best-fit for order[from..]; false when a graph fits nowhere.
  auto best_fit = [&](std::size_t from) {
    for (std::size_t j = from; j < order.size(); ++j) {
      const std::int64_t g = order[j], s = in.sizes[g];
      // The highest non-empty load value <= cap - s: mask the word holding it, then walk down.
      std::int64_t word = (cap - s) >> 6;
      const int bit = static_cast<int>((cap - s) & 63);
      std::uint64_t bits =
          st.nonempty[word] & (bit == 63 ? ~std::uint64_t{0} : ((std::uint64_t{1} << (bit + 1)) - 1));
      while (bits == 0 && word > 0) {
        bits = st.nonempty[--word];
      }
      if (bits == 0) {
        return false;
      }
      place(g, word * 64 + (63 - __builtin_clzll(bits)));
    }
    return true;
  };

  for (std::int64_t b = nbins - 1; b >= 0; --b) {  // bin 0 on top
    push(b, 0);
  }
  State saved;
  std::size_t saved_at = order.size();
  std::int64_t room = nbins * cap;  // total room left; cap <= kBucketLimit keeps this in range
  std::size_t j = 0;
  for (std::int64_t least = 0; j < order.size(); ++j) {
    const std::int64_t g = order[j], s = in.sizes[g];
    if (saved_at == order.size() && room < nbins * std::min(2 * s, cap / 16)) {
      saved = st;
      saved_at = j;
    }
    while (st.head[least] < 0) {
      ++least;
    }
    if (least + s > cap) {
      break;
    }
    place(g, least);
    room -= s;
  }
  // least <= mean load, so a failure implies room < nbins * s; if s >= C/16 the state may not
  // have been saved, and the caller falls back to more bins.
  const bool ok =
      j == order.size() || best_fit(j) || (saved_at < j && (st = std::move(saved), best_fit(saved_at)));
  load = std::move(st.load);
  return ok;
}

// LPT with a binary heap of (load, bin), for capacities beyond kBucketLimit. False if the
// least-loaded bin cannot take a graph.
bool least_loaded_heap(const std::vector<std::int64_t>& order, const PackInput& in, std::int64_t nbins,
                       std::vector<std::int64_t>& bin_of, std::vector<std::int64_t>& load) {
  const std::int64_t cap = in.params.capacity;
  struct Entry {
    std::int64_t load, bin;
    bool operator<(const Entry& o) const { return load != o.load ? load < o.load : bin < o.bin; }
  };
  // All loads start at 0 and ids ascend, so the array is already a heap.
  std::vector<Entry> heap(static_cast<std::size_t>(nbins));
  for (std::int64_t b = 0; b < nbins; ++b) {
    heap[b] = {0, b};
  }
  const std::size_t n = heap.size();
  for (std::int64_t g : order) {
    Entry top = heap[0];
    if (top.load + in.sizes[g] > cap) {
      return false;
    }
    bin_of[g] = top.bin;
    top.load += in.sizes[g];
    std::size_t i = 0;  // sift the grown root down: one pass instead of pop + push
    for (;;) {
      std::size_t c = 2 * i + 1;
      if (c >= n) {
        break;
      }
      if (c + 1 < n && heap[c + 1] < heap[c]) {
        ++c;
      }
      if (!(heap[c] < top)) {
        break;
      }
      heap[i] = heap[c];
      i = c;
    }
    heap[i] = top;
  }
  load.assign(static_cast<std::size_t>(nbins), 0);
  for (const Entry& e : heap) {
    load[e.bin] = e.load;
  }
  return true;
}

bool least_loaded(const std::vector<std::int64_t>& order, const PackInput& in, std::int64_t nbins,
                  std::vector<std::int64_t>& bin_of, std::vector<std::int64_t>& load) {
  return in.params.capacity <= kBucketLimit ? least_loaded_buckets(order, in, nbins, bin_of, load)
                                            : least_loaded_heap(order, in, nbins, bin_of, load);
}

// First fit over `order` with a max-tree of remaining capacities (as in ffd.cpp); returns the
// number of bins used. Always succeeds: every regular graph fits an empty bin, and any-fit
// never leaves two bins at most half full, which bounds the bins by 2 T / C + 1.
std::int64_t first_fit(const std::vector<std::int64_t>& order, const PackInput& in,
                       std::vector<std::int64_t>& bin_of, std::vector<std::int64_t>& load) {
  const std::int64_t cap = in.params.capacity;
  const std::int64_t bound =
      std::min<std::int64_t>(static_cast<std::int64_t>(order.size()), 2 * (in.regular_total / cap) + 3);
  std::int64_t leaves = 1;
  while (leaves < std::max<std::int64_t>(bound, 1)) {
    leaves *= 2;
  }
  std::vector<std::int64_t> room(2 * static_cast<std::size_t>(leaves), cap);
  std::int64_t used = 0;
  for (std::int64_t g : order) {
    const std::int64_t s = in.sizes[g];
    std::int64_t node = 1;
    while (node < leaves) {
      node = room[2 * node] >= s ? 2 * node : 2 * node + 1;
    }
    bin_of[g] = node - leaves;
    used = std::max(used, node - leaves + 1);
    room[node] -= s;
    for (node /= 2; node >= 1; node /= 2) {
      room[node] = std::max(room[2 * node], room[2 * node + 1]);
    }
  }
  load.assign(static_cast<std::size_t>(used), 0);
  for (std::int64_t g : order) {
    load[bin_of[g]] += in.sizes[g];
  }
  return used;
}

// Pairs the k-th heaviest with the k-th lightest bin and applies, per pair, the swap of one
// graph a (heavy) with one graph b (light, or nothing: a move) that brings the two loads
// closest, among those that shrink their difference D: 0 < s_a - s_b < D. The light bin's new
// load is then below the heavy bin's old one, so capacity holds. D is non-increasing along
// the pairs, so only a leading run of pairs can gain; the run stops at D < 2 (no swap can
// help) or D below 1/256 of the capacity: bins that close differ by under 0.4% in cost, and
// steps are formed from bins of similar load anyway, so such a pass would buy nothing worth a
// sweep over millions of graphs. Only the run's bins' members are gathered, so a pass after a
// well-balanced LPT costs little.
void balance_pairs(const std::vector<std::int64_t>& order, const PackInput& in, std::int64_t passes,
                   std::vector<std::int64_t>& bin_of, std::vector<std::int64_t>& load) {
  const std::int64_t nbins = static_cast<std::int64_t>(load.size());
  std::vector<std::int64_t> by_load(static_cast<std::size_t>(nbins));
  std::vector<std::int64_t> slot(static_cast<std::size_t>(nbins), -1);
  std::vector<std::int64_t> start, members, light_sorted;
  auto size_of = [&](std::int64_t g) { return g < 0 ? 0 : in.sizes[g]; };
  for (std::int64_t pass = 0; pass < passes; ++pass) {
    for (std::int64_t b = 0; b < nbins; ++b) {
      by_load[b] = b;
    }
    std::sort(by_load.begin(), by_load.end(),
              [&](std::int64_t a, std::int64_t b) { return load[a] != load[b] ? load[a] > load[b] : a < b; });
    const std::int64_t worth = std::max<std::int64_t>(2, in.params.capacity / 256);
    std::int64_t pairs = 0;
    while (pairs < nbins / 2 && load[by_load[pairs]] - load[by_load[nbins - 1 - pairs]] >= worth) {
      ++pairs;
    }
    if (pairs == 0) {
      return;
    }
    // Members of the 2 x pairs bins involved, grouped by slot (counting sort over `order`).
    std::fill(slot.begin(), slot.end(), -1);
    for (std::int64_t k = 0; k < pairs; ++k) {
      slot[by_load[k]] = 2 * k;
      slot[by_load[nbins - 1 - k]] = 2 * k + 1;
    }
    start.assign(static_cast<std::size_t>(2 * pairs) + 1, 0);
    for (std::int64_t g : order) {
      if (slot[bin_of[g]] >= 0) {
        ++start[slot[bin_of[g]] + 1];
      }
    }
    for (std::int64_t k = 0; k < 2 * pairs; ++k) {
      start[k + 1] += start[k];
    }
    members.resize(static_cast<std::size_t>(start.back()));
    {
      std::vector<std::int64_t> fill(start.begin(), start.end() - 1);
      for (std::int64_t g : order) {
        if (slot[bin_of[g]] >= 0) {
          members[fill[slot[bin_of[g]]]++] = g;
        }
      }
    }
    for (std::int64_t k = 0; k < pairs; ++k) {
      const std::int64_t heavy = by_load[k], light = by_load[nbins - 1 - k];
      const std::int64_t d = load[heavy] - load[light];
      // The light bin's graphs by size, with a virtual graph of size 0 (index -1) for a move.
      light_sorted.assign(1, -1);
      light_sorted.insert(light_sorted.end(), members.begin() + start[2 * k + 1],
                          members.begin() + start[2 * k + 2]);
      std::sort(light_sorted.begin(), light_sorted.end(), [&](std::int64_t a, std::int64_t b) {
        return size_of(a) != size_of(b) ? size_of(a) < size_of(b) : a < b;
      });
      std::int64_t best_a = -1, best_b = -1, best_gap = d;  // |D - 2 delta|; D itself = no change
      for (std::int64_t m = start[2 * k]; m < start[2 * k + 1]; ++m) {
        const std::int64_t a = members[m], sa = in.sizes[a];
        // The ideal partner has size sa - D/2; look at the two sorted neighbours of that value.
        const std::int64_t target = sa - d / 2;
        auto it = std::lower_bound(light_sorted.begin(), light_sorted.end(), target,
                                   [&](std::int64_t g, std::int64_t v) { return size_of(g) < v; });
        for (auto c = (it == light_sorted.begin() ? it : it - 1); c != light_sorted.end() && c <= it; ++c) {
          const std::int64_t delta = sa - size_of(*c);
          if (delta <= 0 || delta >= d) {
            continue;
          }
          const std::int64_t gap = d > 2 * delta ? d - 2 * delta : 2 * delta - d;
          if (gap < best_gap) {
            best_gap = gap;
            best_a = a;
            best_b = *c;
          }
        }
      }
      if (best_a >= 0) {
        const std::int64_t delta = in.sizes[best_a] - size_of(best_b);
        bin_of[best_a] = light;
        if (best_b >= 0) {
          bin_of[best_b] = heavy;
        }
        load[heavy] -= delta;
        load[light] += delta;
      }
    }
  }
}

class Fastmlip final : public Packer {
 public:
  std::string name() const override { return "fastmlip"; }
  std::string summary() const override {
    return "ours: fewest bins, LPT + swaps, randomised per epoch, balanced steps";
  }
  BinList pack(const PackInput& in) const override {
    const std::int64_t cap = in.params.capacity;
    const std::int64_t w = in.params.ranks;
    const std::int64_t n_over = static_cast<std::int64_t>(in.oversize.size());
    auto round_up = [w](std::int64_t x) { return (x + w - 1) / w * w; };

    std::vector<std::int64_t> order = sort_descending(in);
    Rng ties(stream_seed(in.params.seed, in.params.epoch, kFastmlipTies));
    shuffle_tie_classes(order, in, ties);

    std::vector<std::int64_t> bin_of(in.sizes.size(), -1);
    std::vector<std::int64_t> load;
    std::int64_t nbins = 0;
    if (!order.empty()) {
      const std::int64_t needed = std::max<std::int64_t>(1, (in.regular_total + cap - 1) / cap);
      nbins = round_up(needed + n_over) - n_over;
      std::int64_t passes = in.params.swap_passes;
      if (!least_loaded(order, in, nbins, bin_of, load)) {
        // First fit packs tight counts that LPT cannot; it needs at least as many bins.
        std::vector<std::int64_t> ff_bin_of(in.sizes.size(), -1), ff_load;
        const std::int64_t ff = round_up(first_fit(order, in, ff_bin_of, ff_load) + n_over) - n_over;
        if (ff == nbins || !least_loaded(order, in, ff, bin_of, load)) {
          // Keep first fit's bins: all full but the last few, which the swap passes then fill
          // from the heaviest ones, one graph per pair and pass, so they get more passes.
          bin_of.swap(ff_bin_of);
          load = std::move(ff_load);
          load.resize(static_cast<std::size_t>(ff), 0);
          passes = std::max<std::int64_t>(passes, 16);
        }
        nbins = ff;
      }
      balance_pairs(order, in, passes, bin_of, load);
    }

    // All bins: regular ones, then one per oversize graph, then empty ones up to a multiple
    // of W (only when there are no regular graphs to size the count by).
    std::vector<std::int64_t> all_load = std::move(load);
    all_load.resize(static_cast<std::size_t>(nbins));
    std::vector<std::int64_t> graphs = std::move(order);
    for (std::int64_t g : in.oversize) {
      bin_of[g] = static_cast<std::int64_t>(all_load.size());
      all_load.push_back(in.sizes[g]);
      graphs.push_back(g);
    }
    all_load.resize(static_cast<std::size_t>(round_up(static_cast<std::int64_t>(all_load.size()))), 0);
    const std::int64_t total = static_cast<std::int64_t>(all_load.size());

    // Steps of W bins of similar load; the step order and the rank of each bin within its step
    // are drawn per epoch. position[b] is where bin b lands in the step-major output.
    std::vector<std::int64_t> by_load(static_cast<std::size_t>(total));
    for (std::int64_t b = 0; b < total; ++b) {
      by_load[b] = b;
    }
    std::stable_sort(by_load.begin(), by_load.end(),
                     [&](std::int64_t a, std::int64_t b) { return all_load[a] > all_load[b]; });
    const std::int64_t steps = total / w;
    std::vector<std::int64_t> step_order(static_cast<std::size_t>(steps));
    for (std::int64_t t = 0; t < steps; ++t) {
      step_order[t] = t;
    }
    Rng layout(stream_seed(in.params.seed, in.params.epoch, kFastmlipSteps));
    layout.shuffle(step_order.begin(), step_order.end());
    std::vector<std::int64_t> position(static_cast<std::size_t>(total));
    for (std::int64_t k = 0; k < steps; ++k) {
      auto first = by_load.begin() + step_order[k] * w;
      layout.shuffle(first, first + w);
      for (std::int64_t r = 0; r < w; ++r) {
        position[first[r]] = k * w + r;
      }
    }
    for (std::int64_t g : graphs) {
      bin_of[g] = position[bin_of[g]];
    }
    return bins_from_assignment(graphs, bin_of, total);
  }
};

}  // namespace

std::unique_ptr<Packer> make_fastmlip() { return std::make_unique<Fastmlip>(); }

}  // namespace fastmlip::sampling::impl
