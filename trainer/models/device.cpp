// SPDX-License-Identifier: MIT
// What device.hpp needs from Kokkos, in the one trainer source besides the models that includes
// it, so that the sources placing tensors stay free of Kokkos' (in a CUDA build, nvcc's) headers.
// It does not include device.hpp: LibTorch's headers cost nvcc over a minute here, for two
// declarations a mismatch of which fails to link.
#include <Kokkos_Core.hpp>
#include <cstdlib>

namespace fastmlip::trainer {

bool device_kernels_cuda() {
#if defined(KOKKOS_ENABLE_CUDA)
  return true;
#else
  return false;
#endif
}

void start_kokkos([[maybe_unused]] int device_id) {
#if defined(KOKKOS_ENABLE_CUDA)
  // Kokkos 4 (the CUDA builds'); Debian's Kokkos 3.4 has no InitializationSettings.
  Kokkos::InitializationSettings settings;
  settings.set_device_id(device_id);
  Kokkos::initialize(settings);
#else
  Kokkos::initialize();
#endif
  std::atexit([] { Kokkos::finalize(); });
}

}  // namespace fastmlip::trainer
