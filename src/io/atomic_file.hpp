// SPDX-License-Identifier: MIT
#pragma once
/// \file Atomic file replacement: a reader sees the old file or the complete new one, never a
/// partial write, even if the process dies or the disk fills mid-way.
#include <functional>
#include <ostream>
#include <string>
#include <system_error>

namespace fastmlip::io {

/// Writes `path` by calling `write` on a stream to a temporary file in the same directory,
/// flushing it to disk, then renaming it over `path`. On any failure (the callback throws, the
/// stream goes bad, e.g. disk full) the temporary file is removed, `path` is untouched, and a
/// FileError naming `path` is thrown.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

/// Removes `path` and, for a directory, everything under it, without following symbolic links
/// (std::filesystem::remove_all's meaning); a missing `path` is not an error. Sets `ec` on
/// failure. The trainer and its tests call this, never std::filesystem::remove_all: PyPI's
/// PyTorch wheels (2.11 included) export from libtorch.so a copy of libstdc++'s std::filesystem
/// whose remove_all calls a null function, and an executable linking libtorch.so may bind its
/// calls to that copy (every train-potential test crashed so). POSIX nftw has no such twin.
void remove_tree(const std::string& path, std::error_code& ec);
/// As above; throws FileError naming `path` on failure.
void remove_tree(const std::string& path);

}  // namespace fastmlip::io
