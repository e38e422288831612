// SPDX-License-Identifier: MIT
// Writes the seed potentials of the potential-file fuzzers (corpus/potential_mace/,
// corpus/potential_chgnet/) with the core's writer: valid files of a few KB, so that the fuzzers
// start inside the loaders rather than at the container's first check.
//
//   MACE:   tests/models/mace_test_potential.hpp's random potential with tiny widths, one with
//           one interaction and one with two, ZBL and two elements.
//   CHGNet: the shipped chgnet 0.3.0 file and the 0.2.0 test fixture cut down to widths 2-8 and
//           two convolutions: every tensor keeps its name, its extents are mapped (64 -> 2,
//           31 -> 3, ...) and it keeps its first values. Both are loaded by ChgnetModel before
//           they are written, so a seed the loader refuses is never committed.
//
// Usage: fuzz_make_seeds SOURCE_DIR OUT_DIR (writes OUT_DIR/potential_{mace,chgnet}/*.safetensors)
#include <Kokkos_Core.hpp>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <map>
#include <string>

#include "../models/mace_test_potential.hpp"
#include "io/potential_file.hpp"
#include "models/chgnet/chgnet_model.hpp"
#include "models/mace/mace_model.hpp"

namespace {

using namespace fastmlip;

io::PotentialFile shrink_chgnet(const std::string& path) {
  const io::PotentialFile big = io::read_potential_file(path);
  // chgnet's released widths are all one W (64), so every extent names one hyperparameter or a
  // sum of them: W, num_radial, num_angular, the Fourier order, 2 Fa + Fb, 2 Fb + Fg + Fa.
  const auto W = big.meta<std::int64_t>("/hyperparameters/atom_fea_dim");
  const auto radial = big.meta<std::int64_t>("/hyperparameters/num_radial");
  const auto angular = big.meta<std::int64_t>("/hyperparameters/num_angular");
  const std::map<std::int64_t, std::int64_t> extent = {
      {W, 2}, {radial, 3}, {angular, 3}, {(angular - 1) / 2, 1}, {3 * W, 6}, {4 * W, 8}};
  auto dropped = [](const std::string& name) {
    for (const char* layer : {"atom_conv_layers.2.", "atom_conv_layers.3.", "bond_conv_layers.1.",
                              "bond_conv_layers.2.", "angle_layers.1.", "angle_layers.2."}) {
      if (name.rfind(layer, 0) == 0) {
        return true;
      }
    }
    return false;
  };
  io::PotentialFile small;
  small.metadata = big.metadata;
  small.extra_metadata = big.extra_metadata;
  auto& hp = small.metadata["hyperparameters"];
  for (const char* key : {"atom_fea_dim", "bond_fea_dim", "angle_fea_dim", "atom_conv_hidden_dim",
                          "bond_conv_hidden_dim"}) {
    hp[key] = 2;
  }
  hp["num_radial"] = 3;
  hp["num_angular"] = 3;
  hp["n_conv"] = 2;
  hp["mlp_hidden_dims"] = {2, 2, 2};
  small.metadata["provenance"]["writer"] = "fastmlip tests/fuzz/make_seed_potentials.cpp (cut down from " +
                                           std::filesystem::path(path).filename().string() + ")";
  for (const auto& [name, t] : big.tensors()) {
    if (dropped(name)) {
      continue;
    }
    std::vector<std::int64_t> shape = t.shape;
    for (auto& e : shape) {
      if (const auto it = extent.find(e); it != extent.end()) {
        e = it->second;
      }
    }
    io::Tensor s;
    s.name = name;
    s.dtype = t.dtype;
    s.shape = shape;
    std::int64_t numel = 1;
    for (auto e : shape) {
      numel *= e;
    }
    const auto bytes = static_cast<std::size_t>(numel) * io::dtype_size(t.dtype);
    s.data.assign(t.data.begin(), t.data.begin() + static_cast<std::ptrdiff_t>(bytes));
    small.add(std::move(s));
  }
  models::ChgnetModel<Kokkos::DefaultHostExecutionSpace, float> check(
      small);  // throws if the cut-down file is not a valid CHGNet
  return small;
}

void write(const io::PotentialFile& pot, const std::filesystem::path& path) {
  std::filesystem::create_directories(path.parent_path());
  io::write_potential_file(path.string(), pot);
  std::printf("%s: %ju bytes\n", path.c_str(), static_cast<std::uintmax_t>(std::filesystem::file_size(path)));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: %s SOURCE_DIR OUT_DIR\n", argv[0]);
    return 2;
  }
  Kokkos::initialize(argc, argv);
  int status = 0;
  try {
    const std::filesystem::path src = argv[1], out = argv[2];
    test::MaceTestConfig one;
    one.channels = 2;
    one.max_ell = 1;
    one.num_interactions = 1;
    one.correlation = {2};
    one.num_bessel = 2;
    one.z = {29};
    one.symbols = {"Cu"};
    test::MaceTestConfig two = one;
    two.num_interactions = 2;
    two.correlation = {2, 1};
    two.zbl = true;
    two.scale_shift = false;
    two.mlp_per_head = 2;
    two.z = {29, 28};
    two.symbols = {"Cu", "Ni"};
    for (const auto& [cfg, name] : {std::pair{one, "mace_1int.safetensors"}, {two, "mace_2int_zbl.safetensors"}}) {
      const io::PotentialFile pot = test::make_mace_potential(cfg, 7);
      models::MaceModel<Kokkos::DefaultHostExecutionSpace, float> check(pot);
      write(pot, out / "potential_mace" / name);
    }
    write(shrink_chgnet((src / "potentials/chgnet-0.3.0.safetensors").string()),
          out / "potential_chgnet" / "chgnet_0.3.0_small.safetensors");
    write(shrink_chgnet((src / "tests/reference/data/chgnet/chgnet-0.2.0.safetensors").string()),
          out / "potential_chgnet" / "chgnet_0.2.0_small.safetensors");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz_make_seeds: %s\n", e.what());
    status = 1;
  }
  Kokkos::finalize();
  return status;
}
