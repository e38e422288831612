// SPDX-License-Identifier: MIT
// fastmlip-pack: packs graph sizes into batches with each algorithm of src/sampling and
// reports the figures side by side (docs/fastmlip-pack.md).
//
// Everything is computed before anything is written, and files are written atomically, so a
// failing run leaves no partial output behind.
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <iomanip>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/atomic_file.hpp"
#include "sampling/graph_sizes.hpp"
#include "sampling/metrics.hpp"
#include "sampling/sampler.hpp"
#include "svg.hpp"

namespace {

using fastmlip::FileError;
using fastmlip::InputError;
namespace sp = fastmlip::sampling;

// Bad command lines exit with 2, failures while running with 1.
struct UsageError : InputError {
  using InputError::InputError;
};

struct Options {
  std::string sizes_file, extxyz_file, synthetic;
  double cutoff = 5.0, bond_cutoff = 3.0;
  std::vector<std::string> algorithms{"fastmlip"};
  std::string size = "atoms";
  sp::PackParams params;
  std::int64_t epochs = 2;
  bool json = false;
  std::string svg_file, write_sizes;
  std::int64_t svg_steps = 4, svg_ranks = 16;
};

void usage(std::ostream& o) {
  o << "usage: fastmlip-pack (--sizes FILE | --extxyz FILE | --synthetic SPEC) [options]\n"
       "Packs graphs into batches (bins) of a fixed capacity for W ranks with each chosen algorithm and\n"
       "reports padding, load balance, steps, pack time and randomness side by side.\n"
       "\n"
       "Input (exactly one):\n"
       "  --sizes FILE         size list: one graph per line, 'atoms [edges [angles]]' (non-negative\n"
       "                       integers); blank lines and text after '#' are ignored\n"
       "  --extxyz FILE        extended XYZ dataset; edges and angles are counted per frame\n"
       "  --synthetic SPEC     table3[:N]  the MACE paper's Table 3 (2,650,823 graphs, or N in proportion)\n"
       "                       mptrj[:N]   its MPtrj rows only (1,580,312 graphs, or N)\n"
       "  --cutoff R           edge cutoff for --extxyz, Angstrom (default 5)\n"
       "  --bond-cutoff R      CHGNet bond cutoff for --extxyz angles, Angstrom (default 3)\n"
       "\n"
       "Packing:\n"
       "  --capacity C         size units per batch, a positive integer (default 3072)\n"
       "  --ranks W            world size; bins are a multiple of W (default 1)\n"
       "  --algorithm LIST     comma-separated names, or 'all' (default fastmlip):\n";
  for (const auto& name : sp::packer_names()) {
    o << "                         " << std::left << std::setw(15) << name << sp::make_packer(name)->summary()
      << "\n";
  }
  o << "  --size MEASURE       what a graph's size is: atoms, edges, angles, a '+'-joined set such as\n"
       "                       atoms+edges+angles, or weighted:A,B,C = A atoms + B edges + C angles,\n"
       "                       rounded up (default atoms)\n"
       "  --epochs E           plan epochs 0..E-1 (default 2, at least 1)\n"
       "  --seed S             seed shared by all ranks, also of the synthetic draw (default 0)\n"
       "  --allow-oversize     a graph larger than the capacity gets a bin of its own (default: error)\n"
       "  --graphs-per-batch G fixed-count and balanced-pairs: graphs per batch; 0 = the most that can\n"
       "                       never overflow, floor(C / largest size) (default 0)\n"
       "  --tie-tolerance X    fastmlip: sizes within this fraction are shuffled among themselves each\n"
       "                       epoch (default 0.05)\n"
       "  --swap-passes K      fastmlip: heaviest/lightest swap passes (default 2)\n"
       "\n"
       "Output:\n"
       "  --json               one JSON object per algorithm per line, keys: algorithm, graphs, bins,\n"
       "                       steps, padding_fraction, load_max_over_mean, load_cv, pack_seconds,\n"
       "                       pack_cpu_seconds, epoch_overlap, epoch_overlap_random, ranks, capacity,\n"
       "                       size, epochs, seed, plan_hash\n"
       "  --svg FILE           draw epoch 0's plans (one panel per algorithm, bins per rank coloured by\n"
       "                       graph, like the MACE paper's Figure 12)\n"
       "  --svg-steps K        steps drawn per rank (default 4)\n"
       "  --svg-ranks K        ranks drawn (default 16, at most W)\n"
       "  --write-sizes FILE   write the sizes as a size list 'atoms edges angles' (reuse extxyz counts)\n"
       "  -h, --help           this text\n"
       "\n"
       "Figures: bins and steps are epoch 0's; padding_fraction, load_max_over_mean and load_cv are\n"
       "means over the epochs; pack_seconds (wall) and pack_cpu_seconds (this thread's CPU time) are\n"
       "means over the epochs of making one epoch's plan on one core;\n"
       "epoch_overlap is the mean over consecutive epochs of the fraction of graph pairs sharing a batch\n"
       "in epoch e that share one in e+1 (null with one epoch). Output files are written atomically.\n"
       "Exit status: 0 success, 1 error while running, 2 bad command line.\n";
}

std::int64_t parse_int(const std::string& opt, const std::string& v, std::int64_t lo,
                       const std::string& what) {
  errno = 0;
  char* end = nullptr;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0' || errno == ERANGE || x < lo) {
    throw UsageError(opt + " must be " + what + ", got '" + v + "'");
  }
  return x;
}

double parse_real(const std::string& opt, const std::string& v, const std::string& what) {
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0' || !(x > 0) || !(x < 1e6)) {
    throw UsageError(opt + " must be " + what + ", got '" + v + "'");
  }
  return x;
}

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) {
        throw UsageError(a + " needs a value (see --help)");
      }
      return argv[++i];
    };
    if (a == "--help" || a == "-h") {
      usage(std::cout);
      std::exit(0);
    } else if (a == "--sizes") {
      o.sizes_file = value();
    } else if (a == "--extxyz") {
      o.extxyz_file = value();
    } else if (a == "--synthetic") {
      o.synthetic = value();
    } else if (a == "--cutoff") {
      o.cutoff = parse_real(a, value(), "a positive distance in Angstrom");
    } else if (a == "--bond-cutoff") {
      o.bond_cutoff = parse_real(a, value(), "a positive distance in Angstrom");
    } else if (a == "--capacity") {
      o.params.capacity = parse_int(a, value(), 1, "a positive integer (size units per batch)");
    } else if (a == "--ranks") {
      o.params.ranks = parse_int(a, value(), 1, "a positive integer (the world size W)");
    } else if (a == "--algorithm") {
      const std::string v = value();
      o.algorithms.clear();
      if (v == "all") {
        o.algorithms = sp::packer_names();
      } else {
        std::stringstream ss(v);
        for (std::string name; std::getline(ss, name, ',');) {
          try {
            sp::make_packer(name);
          } catch (const InputError& e) {
            throw UsageError(std::string("--algorithm: ") + e.what() + ", or all");
          }
          o.algorithms.push_back(name);
        }
      }
    } else if (a == "--size") {
      o.size = value();
      try {
        sp::SizeMeasure::parse(o.size);
      } catch (const InputError& e) {
        throw UsageError(std::string("--size: ") + e.what());
      }
    } else if (a == "--epochs") {
      o.epochs = parse_int(a, value(), 1, "a positive integer");
    } else if (a == "--seed") {
      o.params.seed = static_cast<std::uint64_t>(parse_int(a, value(), 0, "a non-negative integer"));
    } else if (a == "--allow-oversize") {
      o.params.allow_oversize = true;
    } else if (a == "--graphs-per-batch") {
      o.params.graphs_per_batch = parse_int(a, value(), 0, "0 (automatic) or a positive integer");
    } else if (a == "--tie-tolerance") {
      const std::string v = value();
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(x >= 0 && x < 1)) {
        throw UsageError("--tie-tolerance must be a fraction in [0, 1), got '" + v + "'");
      }
      o.params.tie_tolerance = x;
    } else if (a == "--swap-passes") {
      o.params.swap_passes = parse_int(a, value(), 0, "a non-negative integer");
    } else if (a == "--json") {
      o.json = true;
    } else if (a == "--svg") {
      o.svg_file = value();
    } else if (a == "--svg-steps") {
      o.svg_steps = parse_int(a, value(), 1, "a positive integer");
    } else if (a == "--svg-ranks") {
      o.svg_ranks = parse_int(a, value(), 1, "a positive integer");
    } else if (a == "--write-sizes") {
      o.write_sizes = value();
    } else {
      throw UsageError("unknown option '" + a + "' (see --help)");
    }
  }
  const int inputs = int(!o.sizes_file.empty()) + int(!o.extxyz_file.empty()) + int(!o.synthetic.empty());
  if (inputs != 1) {
    throw UsageError(inputs == 0
                         ? "no input: give --sizes FILE, --extxyz FILE or --synthetic SPEC (see --help)"
                         : "give only one of --sizes, --extxyz and --synthetic");
  }
  return o;
}

struct Report {
  std::string algorithm;
  sp::PlanMetrics first;  // epoch 0
  double padding = 0, max_over_mean = 0, cv = 0, seconds = 0, cpu_seconds = 0;
  std::optional<double> overlap;
  double overlap_random = 0;
  std::uint64_t hash = 0;
  fastmlip::pack::PlanDrawing drawing;
};

// CPU time of this thread: on a shared machine wall time also counts the time other processes
// held the core, so both are reported.
double thread_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

std::string hex(std::uint64_t v) {
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

Report run(const std::string& algorithm, const std::vector<std::int64_t>& sizes, const Options& opt) {
  const auto packer = sp::make_packer(algorithm);
  Report rep;
  rep.algorithm = algorithm;
  sp::Plan previous;
  double overlap_sum = 0;
  for (std::int64_t e = 0; e < opt.epochs; ++e) {
    sp::PackParams p = opt.params;
    p.epoch = static_cast<std::uint64_t>(e);
    const double c0 = thread_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    sp::Plan plan = sp::make_plan(*packer, sizes, p);
    rep.seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    rep.cpu_seconds += thread_cpu_seconds() - c0;
    const sp::PlanMetrics m = sp::measure_plan(plan);
    rep.padding += m.padding_fraction;
    rep.max_over_mean += m.load_max_over_mean;
    rep.cv += m.load_cv;
    if (e == 0) {
      rep.first = m;
      rep.hash = sp::plan_hash(plan);
      if (!opt.svg_file.empty()) {
        auto& d = rep.drawing;
        d.ranks_total = plan.ranks;
        d.steps_total = static_cast<std::int64_t>(plan.steps());
        d.ranks_drawn = std::min(plan.ranks, opt.svg_ranks);
        d.steps_drawn = std::min(d.steps_total, opt.svg_steps);
        for (std::int64_t r = 0; r < d.ranks_drawn; ++r) {
          for (std::int64_t t = 0; t < d.steps_drawn; ++t) {
            std::vector<std::pair<std::int64_t, std::int64_t>> bin;
            for (std::int64_t g : plan.bin(plan.bin_at(static_cast<std::size_t>(t), r))) {
              bin.push_back({g, sizes[g]});
            }
            d.bins.push_back(std::move(bin));
          }
        }
      }
    } else {
      overlap_sum += sp::epoch_overlap(previous, plan);
      rep.overlap_random = sp::epoch_overlap_random(plan);
    }
    previous = std::move(plan);
  }
  const double n = static_cast<double>(opt.epochs);
  rep.padding /= n;
  rep.max_over_mean /= n;
  rep.cv /= n;
  rep.seconds /= n;
  rep.cpu_seconds /= n;
  if (opt.epochs > 1) {
    rep.overlap = overlap_sum / (n - 1);
  }
  char title[200];
  // The picture is epoch 0 (the JSON figures are means over all epochs): say so.
  std::snprintf(title, sizeof title, "%s, epoch 0: padding %.2f%%, load max/mean %.4f, load CV %.4f, %lld steps",
                algorithm.c_str(), 100 * rep.first.padding_fraction, rep.first.load_max_over_mean,
                rep.first.load_cv, static_cast<long long>(rep.first.steps));
  rep.drawing.title = title;
  return rep;
}

int main_checked(int argc, char** argv) {
  const Options opt = parse(argc, argv);
  sp::SizeList list;
  if (!opt.sizes_file.empty()) {
    list = sp::read_size_list(opt.sizes_file);
  } else if (!opt.extxyz_file.empty()) {
    list = sp::sizes_from_extxyz(opt.extxyz_file, opt.cutoff, opt.bond_cutoff);
  } else {
    list = sp::synthetic_sizes(opt.synthetic, opt.params.seed);
  }
  const sp::SizeMeasure measure = sp::SizeMeasure::parse(opt.size);
  const std::vector<std::int64_t> sizes = sp::packing_sizes(list, measure);
  if (!opt.params.allow_oversize) {
    // Checked here rather than left to make_plan so the message can name the file and line.
    for (std::size_t g = 0; g < sizes.size(); ++g) {
      if (sizes[g] > opt.params.capacity) {
        const std::string msg = "graph " + std::to_string(g) + " (0-based) has size " +
                                std::to_string(sizes[g]) + " (" + opt.size + "), more than --capacity " +
                                std::to_string(opt.params.capacity) +
                                "; raise --capacity, or pass --allow-oversize to give it a bin of its own";
        if (g < list.lines.size()) {
          throw FileError(list.source, list.lines[g], msg);
        }
        throw InputError(list.source + ": " + msg);
      }
    }
  }

  std::vector<Report> reports;
  for (const auto& name : opt.algorithms) {
    reports.push_back(run(name, sizes, opt));
  }

  char caption[400];
  std::snprintf(caption, sizeof caption, "%zu graphs from %s, size %s, capacity %lld, %lld ranks, seed %llu",
                sizes.size(), list.source.c_str(), opt.size.c_str(),
                static_cast<long long>(opt.params.capacity), static_cast<long long>(opt.params.ranks),
                static_cast<unsigned long long>(opt.params.seed));
  // Everything that can fail is done before the first file is written.
  std::string svg;
  if (!opt.svg_file.empty()) {
    std::vector<fastmlip::pack::PlanDrawing> panels;
    for (const auto& r : reports) {
      panels.push_back(r.drawing);
    }
    svg = fastmlip::pack::render_svg(panels, opt.params.capacity, caption);
  }
  if (!opt.write_sizes.empty()) {
    fastmlip::io::write_file_atomically(opt.write_sizes, [&](std::ostream& o) { sp::write_size_list(o, list); });
  }
  if (!opt.svg_file.empty()) {
    fastmlip::io::write_file_atomically(opt.svg_file, [&](std::ostream& o) { o << svg; });
  }

  if (opt.json) {
    for (const auto& r : reports) {
      nlohmann::ordered_json j;
      j["algorithm"] = r.algorithm;
      j["graphs"] = r.first.graphs;
      j["bins"] = r.first.bins;
      j["steps"] = r.first.steps;
      j["padding_fraction"] = r.padding;
      j["load_max_over_mean"] = r.max_over_mean;
      j["load_cv"] = r.cv;
      j["pack_seconds"] = r.seconds;
      j["pack_cpu_seconds"] = r.cpu_seconds;
      j["epoch_overlap"] = r.overlap ? nlohmann::ordered_json(*r.overlap) : nlohmann::ordered_json(nullptr);
      j["epoch_overlap_random"] =
          opt.epochs > 1 ? nlohmann::ordered_json(r.overlap_random) : nlohmann::ordered_json(nullptr);
      j["ranks"] = opt.params.ranks;
      j["capacity"] = opt.params.capacity;
      j["size"] = opt.size;
      j["epochs"] = opt.epochs;
      j["seed"] = opt.params.seed;
      j["plan_hash"] = hex(r.hash);
      std::cout << j.dump() << "\n";
    }
  } else {
    std::cout << "fastmlip-pack: " << caption << ", " << opt.epochs << " epoch(s)\n";
    std::printf("%-15s %10s %8s %9s %9s %8s %9s %11s %11s\n", "algorithm", "bins", "steps", "padding",
                "max/mean", "load_cv", "pack_s", "overlap", "random");
    for (const auto& r : reports) {
      std::printf("%-15s %10lld %8lld %8.3f%% %9.4f %8.4f %9.3f ", r.algorithm.c_str(),
                  static_cast<long long>(r.first.bins), static_cast<long long>(r.first.steps),
                  100 * r.padding, r.max_over_mean, r.cv, r.seconds);
      if (r.overlap) {
        std::printf("%11.3e %11.3e\n", *r.overlap, r.overlap_random);
      } else {
        std::printf("%11s %11s\n", "-", "-");
      }
    }
  }
  std::cout.flush();
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return main_checked(argc, argv);
  } catch (const UsageError& e) {
    std::cerr << "fastmlip-pack: error: " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "fastmlip-pack: error: " << e.what() << "\n";
    return 1;
  }
}
