// SPDX-License-Identifier: MIT
#pragma once
/// \file Atomic file replacement: a reader sees the old file or the complete new one, never a
/// partial write, even if the process dies or the disk fills mid-way.
#include <functional>
#include <ostream>
#include <string>

namespace fastmlip::io {

/// Writes `path` by calling `write` on a stream to a temporary file in the same directory,
/// flushing it to disk, then renaming it over `path`. On any failure (the callback throws, the
/// stream goes bad, e.g. disk full) the temporary file is removed, `path` is untouched, and a
/// FileError naming `path` is thrown.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

}  // namespace fastmlip::io
