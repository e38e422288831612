// SPDX-License-Identifier: MIT
#include "core/out_of_memory.hpp"

namespace fastmlip {

ResourceError out_of_memory(const MemoryContext& c, const char* allocator_said) {
  // The allocator's text on one line, without Kokkos' closing note that it has no traceback.
  std::string what;
  for (const char* p = allocator_said; *p; ++p) {
    const bool blank = *p == '\n' || *p == ' ';
    if (!(blank && (what.empty() || what.back() == ' '))) {
      what += blank ? ' ' : *p;
    }
  }
  const auto trim = [&what] {
    while (!what.empty() && what.back() == ' ') {
      what.pop_back();
    }
  };
  trim();
  const std::string noise = "Traceback functionality not available";
  if (what.size() >= noise.size() && what.compare(what.size() - noise.size(), noise.size(), noise) == 0) {
    what.erase(what.size() - noise.size());
    trim();
  }
  return ResourceError(
      c.source + ": out of " + c.space + " memory evaluating " + std::to_string(c.n_local) + " local and " +
      std::to_string(c.n_total - c.n_local) + " ghost atoms with " + std::to_string(c.num_edges) +
      " edges in " + (c.single ? "float32" : "float64") + " (" + what +
      "). The work buffers grow with the atoms and edges on each rank: run on more MPI ranks (or "
      "GPUs), so that each holds fewer atoms" +
      (c.single ? "" : ", or evaluate in float32 (half the memory)") + ".");
}

}  // namespace fastmlip
