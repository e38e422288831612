// SPDX-License-Identifier: MIT
#pragma once
/// \file Graph sizes for the batch sampler: per graph the atoms, edges and angles, where they
/// come from (a size list, an extended XYZ dataset, a synthetic draw) and the one number per
/// graph that is packed (the size measure).
#include <cstddef>
#include <cstdint>
#include <istream>
#include <ostream>
#include <string>
#include <vector>

namespace fastmlip::sampling {

/// The counts of one graph. Edges are directed (i->j and j->i both counted), angles are
/// CHGNet's ordered pairs of distinct bonds at a centre atom (graph::count_graph).
struct GraphSize {
  std::int64_t atoms = 0;
  std::int64_t edges = 0;
  std::int64_t angles = 0;
};

/// How the packed size of a graph is computed from its counts: a non-negative weighted sum
/// w_a atoms + w_e edges + w_g angles, rounded up to an integer.
///
/// Spellings: `atoms`, `edges`, `angles`, any '+'-joined set of them (`atoms+edges+angles`,
/// FastCHGNet's "feature number"), or `weighted:a,b,c`. Rounding up (after forgiving 1e-9
/// relative to absorb the binary error of weights like 0.1) means a bin never holds more work
/// than its capacity says.
struct SizeMeasure {
  double w_atoms = 1.0;
  double w_edges = 0.0;
  double w_angles = 0.0;
  std::string spec = "atoms";

  /// Parses a spelling above; throws InputError naming the spelling and the accepted ones.
  static SizeMeasure parse(const std::string& spec);
  bool needs_edges() const noexcept { return w_edges != 0.0; }
  bool needs_angles() const noexcept { return w_angles != 0.0; }
  /// The packed size of one graph. Throws InputError if it does not fit in 63 bits.
  std::int64_t operator()(const GraphSize& g) const;
};

/// A list of graph sizes and where each came from, so that errors can name the file and line.
struct SizeList {
  std::vector<GraphSize> graphs;
  /// How many of atoms, edges, angles were given per graph (1 to 3): a size list may give only
  /// atoms; extended XYZ and synthetic lists always have all three.
  std::vector<int> columns;
  /// The file (or "synthetic:SPEC") the sizes came from.
  std::string source;
  /// 1-based line of each graph in `source` (the atom-count line of an extended XYZ frame);
  /// empty for synthetic lists.
  std::vector<long> lines;

  std::size_t size() const noexcept { return graphs.size(); }
  /// "FILE:LINE" of graph g, or "SOURCE graph g" (0-based) when there are no lines.
  std::string where(std::size_t g) const;
};

/// Reads a plain size list: one graph per line, `atoms [edges [angles]]` as non-negative
/// integers separated by blanks; blank lines and text after '#' are ignored. Throws FileError
/// with the file and line for anything else.
SizeList read_size_list(const std::string& path);
SizeList read_size_list(std::istream& in, const std::string& source);

/// Writes a size list in the format read_size_list reads (a header comment, then
/// `atoms edges angles` per graph, all three columns).
void write_size_list(std::ostream& out, const SizeList& list);

/// Counts atoms, edges (within `cutoff`) and CHGNet angles (bonds within `bond_cutoff`) of every
/// frame of an extended XYZ file, streaming (one frame in memory at a time). Errors, including a
/// coincident-atom NumericalError, become FileError naming the file and the frame's line.
SizeList sizes_from_extxyz(const std::string& path, double cutoff, double bond_cutoff);

/// The packed size of every graph. A measure that needs a column a line did not give throws
/// FileError naming that file and line.
std::vector<std::int64_t> packing_sizes(const SizeList& list, const SizeMeasure& measure);

/// A synthetic dataset, deterministic in (spec, seed):
/// - `table3` or `table3:N`: the MACE paper's Table 3 (eight sources, 2,650,823 graphs), or N
///   graphs with the same source proportions. Atom counts are uniform in each source's range,
///   except MPtrj's: a log-normal, exp(3.12 + 0.8 Z) rounded, redrawn outside 1..444, whose
///   mean is 31.1 atoms (FastCHGNet: 49.3M forces over 1.58M structures) with a long right tail
///   (median 23, 99.9th percentile 262, maximum 444).
/// - `mptrj` or `mptrj:N`: the MPtrj rows alone (1,580,312 graphs by default).
/// Edges and angles follow a per-graph model calibrated on FastCHGNet's Table II (39 to 56
/// edges and 72 to 262 angles per atom): edges = round(atoms x e), e uniform in [30, 60);
/// angles = round(atoms x b (b - 1)), b uniform in [6, 16) bonds per atom.
/// Throws InputError for an unknown spec or a bad N.
SizeList synthetic_sizes(const std::string& spec, std::uint64_t seed);

}  // namespace fastmlip::sampling
