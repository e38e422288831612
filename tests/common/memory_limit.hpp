// SPDX-License-Identifier: MIT
#pragma once
// Runs a callable in a child process whose address space may grow only a little, to test that
// running out of memory is a clear fastmlip::ResourceError (core/out_of_memory.hpp). The
// sanitizers reserve address space of their own, which defeats the limit: skip under them.
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <exception>
#include <string>

#include "core/error.hpp"
#include "sanitized.hpp"

namespace fastmlip::test {

struct ChildOutcome {
  /// 0: f threw a ResourceError; 1: f returned; 2: f threw something else; 3: no limit could be
  /// set; 4: the message could not be sent; -1: the child did not exit normally.
  int code = -1;
  std::string message;  ///< the error's text, or what went wrong
};

/// f() in a forked child whose address-space limit is its size at the fork plus `headroom`.
template <class F>
ChildOutcome run_with_memory_headroom(F&& f, std::size_t headroom) {
  int fds[2];
  if (pipe(fds) != 0) {
    return {-1, "pipe failed"};
  }
  const pid_t pid = fork();
  if (pid < 0) {
    return {-1, "fork failed"};
  }
  if (pid == 0) {  // the child: nothing but f, then _exit with what it caught
    close(fds[0]);
    long pages = 0;
    if (FILE* file = std::fopen("/proc/self/statm", "r")) {
      if (std::fscanf(file, "%ld", &pages) != 1) {
        pages = 0;
      }
      std::fclose(file);
    }
    rlimit lim{};
    getrlimit(RLIMIT_AS, &lim);
    lim.rlim_cur = static_cast<rlim_t>(pages) * static_cast<rlim_t>(sysconf(_SC_PAGESIZE)) + headroom;
    std::string msg = "it succeeded";
    int code = 1;
    if (pages == 0 || setrlimit(RLIMIT_AS, &lim) != 0) {
      msg = "could not limit the address space";
      code = 3;
    } else {
      try {
        f();
      } catch (const ResourceError& e) {
        msg = e.what();
        code = 0;
      } catch (const std::exception& e) {
        msg = std::string("not a ResourceError: ") + e.what();
        code = 2;
      }
    }
    const ssize_t written = write(fds[1], msg.data(), msg.size());
    _exit(written == static_cast<ssize_t>(msg.size()) ? code : 4);
  }
  close(fds[1]);
  ChildOutcome out;
  char buf[4096];
  for (ssize_t n; (n = read(fds[0], buf, sizeof buf)) > 0;) {
    out.message.append(buf, static_cast<std::size_t>(n));
  }
  close(fds[0]);
  int status = 0;
  if (waitpid(pid, &status, 0) == pid && WIFEXITED(status)) {
    out.code = WEXITSTATUS(status);
  }
  return out;
}

}  // namespace fastmlip::test
