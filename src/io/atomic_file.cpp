// SPDX-License-Identifier: MIT
#include "io/atomic_file.hpp"

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/error.hpp"

namespace fastmlip::io {

void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write) {
  // Same directory as the target, so rename() is atomic (no cross-filesystem copy).
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  auto fail = [&](const std::string& why) {
    std::remove(tmp.c_str());
    throw FileError(path, 0, why + "; the previous file (if any) is unchanged");
  };
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      fail(std::string("cannot create temporary file '") + tmp + "': " + std::strerror(errno) +
           " (check that the directory exists and is writable)");
    }
    try {
      write(out);
    } catch (const std::exception& e) {
      out.close();
      fail(std::string("write aborted: ") + e.what());
    }
    out.flush();
    if (!out) {
      fail("write failed (disk full or I/O error)");
    }
  }
  // fsync before rename: otherwise a crash can leave the new name pointing at empty data.
  const int fd = ::open(tmp.c_str(), O_RDONLY);
  if (fd < 0 || ::fsync(fd) != 0) {
    if (fd >= 0) {
      ::close(fd);
    }
    fail(std::string("fsync failed: ") + std::strerror(errno));
  }
  ::close(fd);
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    fail(std::string("rename failed: ") + std::strerror(errno));
  }
}

namespace {

// nftw's callback: entries come children first (FTW_DEPTH), so each directory is empty by the
// time it is removed. A non-zero return stops the walk and is nftw's result.
int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  return std::remove(path) == 0 ? 0 : errno;
}

}  // namespace

void remove_tree(const std::string& path, std::error_code& ec) {
  ec.clear();
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0) {
    if (errno != ENOENT) {
      ec = std::error_code(errno, std::generic_category());
    }
    return;
  }
  // FTW_PHYS: a symbolic link is removed, never followed. 16: the directories held open at once.
  const int rc = ::nftw(path.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
  if (rc != 0) {
    ec = std::error_code(rc > 0 ? rc : errno, std::generic_category());
  }
}

void remove_tree(const std::string& path) {
  std::error_code ec;
  remove_tree(path, ec);
  if (ec) {
    throw FileError(path, 0, "cannot remove it: " + ec.message());
  }
}

}  // namespace fastmlip::io
