// SPDX-License-Identifier: MIT
#pragma once
/// \file Extended XYZ, in ASE's conventions.
///
/// A frame is: a line with the atom count; a comment line of key=value pairs, among them
/// `Lattice="ax ay az bx by bz cx cy cz"` (rows are the cell vectors), `Properties=` (column
/// layout, e.g. species:S:1:pos:R:3:forces:R:3) and `pbc="T T T"`; then one line per atom.
/// Labels follow ASE: `energy` (eV), `free_energy`, `stress` (eV/A^3, 9 values row-major or 6
/// Voigt xx yy zz yz xz xy, tensile positive), `virial` (eV), per-atom `forces` (eV/A).
#include <array>
#include <cstddef>
#include <functional>
#include <istream>
#include <map>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

namespace fastmlip::io {

/// One per-atom column group of Properties=, e.g. forces:R:3.
struct AtomColumn {
  std::string name;
  char type = 'R';  ///< 'R' real, 'I' integer, 'L' logical (stored as 0/1), 'S' string
  int width = 1;    ///< number of columns
  std::vector<double> numbers;       ///< natoms*width values for R, I, L
  std::vector<std::string> strings;  ///< natoms*width values for S
};

/// One configuration.
struct Frame {
  std::vector<std::string> species;  ///< element symbol per atom
  std::vector<double> positions;     ///< natoms*3, Angstrom
  std::optional<std::array<double, 9>> cell;  ///< row-major, rows are a, b, c
  std::array<bool, 3> pbc{false, false, false};
  /// Comment-line values other than Lattice, Properties and pbc, as written (unquoted).
  /// Insertion order is kept so that a round trip writes the same line.
  std::vector<std::pair<std::string, std::string>> info;
  /// Per-atom columns other than species and pos, in file order.
  std::vector<AtomColumn> arrays;

  /// Where the frame came from, for error messages ("" and 0 if built in memory).
  std::string source;
  long line = 0;   ///< 1-based line of the atom-count line
  long index = 0;  ///< 1-based position of the frame in its file (ase.io.read's index + 1)

  std::size_t natoms() const noexcept { return species.size(); }
  /// The info value of `key`, or nullptr.
  const std::string* find_info(const std::string& key) const noexcept;
  /// Sets (or replaces) an info value.
  void set_info(const std::string& key, const std::string& value);
  /// Parses a numeric info value (a scalar or a quoted list). Throws FileError naming the
  /// frame's file and line if the key is missing or not numeric.
  std::vector<double> info_numbers(const std::string& key) const;
  /// The per-atom column `name`, or nullptr.
  const AtomColumn* find_array(const std::string& name) const noexcept;
  /// Adds (or replaces) a real per-atom column of the given width; values has natoms*width.
  void set_array(const std::string& name, int width, std::vector<double> values);
};

/// Reads frames one by one from a stream; errors (FileError) name `source`, the line and the
/// 1-based frame ("data.xyz:17: frame 3: atom 2 has 4 columns, ...").
class ExtxyzReader {
 public:
  ExtxyzReader(std::istream& in, std::string source);
  /// Reads the next frame into `frame`; returns false at a clean end of input.
  bool next(Frame& frame);
  /// As next(), but after the count and comment lines asks `want(frame, natoms)`, the frame
  /// holding its cell, pbc, info and the per-atom columns' names and types (no values yet). When
  /// that is false the atom lines are passed over unparsed (counted, so that the lines and
  /// frames of later errors stay right) and the frame has no atoms: what a reader that needs only
  /// some frames of a large file does with the others.
  bool next(Frame& frame, const std::function<bool(const Frame&, std::size_t)>& want);

 private:
  bool read_frame(Frame& frame, const std::function<bool(const Frame&, std::size_t)>* want);
  std::istream& m_in;
  std::string m_source;
  long m_line = 0;
  long m_frames = 0;  ///< frames read so far
};

/// All frames of a file. Throws FileError (path, line) on malformed content.
std::vector<Frame> read_extxyz(const std::string& path);

/// Writes one frame. Numbers are written with 17 significant digits so that a read-back
/// reproduces every double exactly.
void write_extxyz(std::ostream& out, const Frame& frame);

/// Writes all frames to `path` atomically (see write_file_atomically).
void write_extxyz(const std::string& path, const std::vector<Frame>& frames);

}  // namespace fastmlip::io
