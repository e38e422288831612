// SPDX-License-Identifier: MIT
#pragma once
// What every harness shares: the failure policy and scratch files.
//
// The policy is the core's error contract: any input either parses or is refused with a
// fastmlip::Error. Harnesses therefore catch fastmlip::Error only; any other exception escapes to
// std::terminate, which libFuzzer reports as a crash, as it does a sanitizer finding. A broken
// invariant the harness checks itself (a round trip that changes a value) calls fail().
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

namespace fastmlip::fuzz {

/// Reports a broken invariant and aborts, so that libFuzzer saves the input.
[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "fastmlip fuzz: %s\n", what.c_str());
  std::fflush(stderr);
  std::abort();
}

/// A scratch file of this process, for the readers that take a path (the potential reader and
/// train-potential's --config). On tmpfs when there is one: a fuzzer writes it on every run.
inline std::string scratch_path(const char* suffix) {
  static const std::string dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    if (tmp != nullptr && *tmp != '\0') {
      return std::string(tmp);
    }
    return std::string(access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
  }();
  return dir + "/fastmlip-fuzz-" + std::to_string(getpid()) + suffix;
}

/// Writes the input to `path`, replacing what was there.
inline void write_input(const std::string& path, const std::uint8_t* data, std::size_t size) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  if (!out) {
    fail("cannot write the scratch file " + path);
  }
}

}  // namespace fastmlip::fuzz
