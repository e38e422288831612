// SPDX-License-Identifier: MIT
#include "graph/atom_graph.hpp"

#include "graph/impl/atom_graph_impl.hpp"

namespace fastmlip::graph {

std::vector<int> center_offsets(int n_local, const std::vector<int>& center) {
  std::vector<int> start(n_local < 0 ? 1 : n_local + 1, 0);
  for (int c : center) {
    if (c >= 0 && c < n_local) {
      ++start[c + 1];
    }
  }
  for (int i = 0; i < n_local; ++i) {
    start[i + 1] += start[i];
  }
  return start;
}

template void check_graph(const AtomGraph<float, Kokkos::HostSpace>&, int, const std::string&,
                          const std::string&, const LengthFloor*);
template void check_graph(const AtomGraph<double, Kokkos::HostSpace>&, int, const std::string&,
                          const std::string&, const LengthFloor*);
#if defined(KOKKOS_ENABLE_CUDA)
// Graphs in GPU memory, for the models' device instantiation (Kokkos built with CUDA).
template void check_graph(const AtomGraph<float, Kokkos::CudaSpace>&, int, const std::string&,
                          const std::string&, const LengthFloor*);
template void check_graph(const AtomGraph<double, Kokkos::CudaSpace>&, int, const std::string&,
                          const std::string&, const LengthFloor*);
#endif

}  // namespace fastmlip::graph
