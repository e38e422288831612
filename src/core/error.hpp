// SPDX-License-Identifier: MIT
#pragma once
/// \file Typed errors of the fastmlip core.
///
/// The core never prints or exits: it throws one of these, with a message that starts with
/// the function or file, names the offending value (file and line, atom, species) and says
/// what to do. The LAMMPS pair styles turn them into error->all (InputError, FileError:
/// the same on every rank) or error->one (everything else: rank-local), the trainer into a
/// clean exit with that message.
#include <stdexcept>
#include <string>

namespace fastmlip {

/// Base class of every error the core throws.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

/// A user-supplied value or setting is invalid (bad option, unknown species, bad shape).
class InputError : public Error {
 public:
  using Error::Error;
};

/// A file cannot be opened, read or written, or its content is malformed. The message names
/// the path and, where known, the 1-based line.
class FileError : public Error {
 public:
  FileError(const std::string& path, long line, const std::string& what)
      : Error(path + (line > 0 ? ":" + std::to_string(line) : std::string()) + ": " + what),
        m_path(path),
        m_line(line),
        m_detail(what) {}
  const std::string& path() const noexcept { return m_path; }
  long line() const noexcept { return m_line; }
  /// The message without the "path:line: " prefix, for callers that add context and rethrow.
  const std::string& detail() const noexcept { return m_detail; }

 private:
  std::string m_path;
  long m_line;
  std::string m_detail;
};

/// Input that would make the arithmetic meaningless (coincident atoms, a NaN label). Raised
/// before a NaN can be produced, never after.
class NumericalError : public Error {
 public:
  using Error::Error;
};

/// A feature exists in the format or the model but is not supported by this build (e.g. a
/// CUDA kernel in a CPU-only build). Says what is supported.
class UnsupportedError : public Error {
 public:
  using Error::Error;
};

/// Host or device memory ran out. Says what was being evaluated, how much was asked (where the
/// allocator said), and what to do (more MPI ranks, float32).
class ResourceError : public Error {
 public:
  using Error::Error;
};

}  // namespace fastmlip
