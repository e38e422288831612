// SPDX-License-Identifier: MIT
// The MACE layout writer (models/mace/mace_layout.hpp) against files the converter made from
// mace-torch models: for the same hyperparameters the writer gives the tensors (names and shapes)
// and block hyperparameters mace-torch's model has. What differs by design is left out and said
// so: the converter keeps e3nn's masks, empty biases and compiled buffers that the loader never
// reads, and the contractions' U and weights are in our coupling basis (fewer columns).
#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "io/potential_file.hpp"
#include "models/mace/mace_layout.hpp"
#include "models/mace/mace_model.hpp"
#include "models/mace/mace_spec.hpp"
#include "models/mace/mace_stages.hpp"

namespace fastmlip::models::mace {
namespace {

const std::string kData = std::string(FASTMLIP_REFERENCE_DATA_DIR) + "/mace/";

bool converter_only(const std::string& name, const std::vector<std::int64_t>& shape) {
  const bool empty = !shape.empty() && shape[0] == 0;
  // mace-torch >= 0.3.14's *_zeroed flags (the U matrices are our basis here, so are their flags).
  return empty || name.find("output_mask") != std::string::npos ||
         name.find("_zeroed") != std::string::npos || name.find("_compiled") != std::string::npos ||
         name == "num_interactions" || name == "r_max" || name == "radial_embedding.bessel_fn.r_max" ||
         name == "radial_embedding.cutoff_fn.r_max" || name == "radial_embedding.cutoff_fn.p";
}
bool our_basis(const std::string& name) { return name.find("symmetric_contractions") != std::string::npos; }

/// name -> shape of every tensor, less the converter's extras.
std::map<std::string, std::vector<std::int64_t>> tensors(const io::PotentialFile& f) {
  std::map<std::string, std::vector<std::int64_t>> out;
  for (const auto& [name, t] : f.tensors()) {
    if (!converter_only(name, t.shape)) {
      out[name] = t.shape;
    }
  }
  return out;
}

/// The writer's file for layout `c` (weights 0.01, E0s -1, unit scale): only its tensor names,
/// shapes and hyperparameters are compared.
io::PotentialFile write_fixed(const MaceLayout& c) {
  MaceLayoutValues v;
  const std::size_t H = c.heads.size();
  v.atomic_energies.assign(H * c.atomic_numbers.size(), -1.0);
  if (c.scale_shift) {
    v.scale.assign(H, 1.0);
    v.shift.assign(H, 0.0);
  }
  v.provenance = {{"writer", "test_mace_layout 0"}};
  return write_mace_layout(c, v, [](const std::string&, std::int64_t n, double) {
    return std::vector<double>(static_cast<std::size_t>(n), 0.01);
  });
}

/// That loading `f` is an InputError whose message holds `words`.
void expect_load_refused(const io::PotentialFile& f, const MaceOptions& o, const std::string& words) {
  try {
    load_mace_spec(f, o);
    ADD_FAILURE() << "loaded, but must be refused: " << words;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

/// That writing `c` (write_fixed's values) is an InputError whose message holds `words`.
void expect_write_refused(const MaceLayout& c, const std::string& words) {
  try {
    write_fixed(c);
    ADD_FAILURE() << "accepted: " << words;
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

/// Every tensor of mace-torch's model (the converter's file `ref`) is in `ours` with its shape
/// (the contractions' in our basis aside), and `ours` has no other.
void expect_mace_torchs_tensors(const io::PotentialFile& ref, const io::PotentialFile& ours) {
  const auto want = tensors(ref), got = tensors(ours);
  for (const auto& [name, shape] : want) {
    const auto it = got.find(name);
    if (it == got.end()) {
      ADD_FAILURE() << "the writer lacks mace-torch's tensor " << name;
    } else if (!our_basis(name)) {
      EXPECT_EQ(it->second, shape) << name;
    }
  }
  for (const auto& [name, shape] : got) {
    EXPECT_EQ(want.count(name), 1u) << "the writer adds a tensor mace-torch's model lacks: " << name;
  }
}

/// The reduced width most mace-torch 0.3.16 fixtures share (make_mace_fixtures.py): 6 channels,
/// max_L 1, max_ell 2, correlation 2, 8 Bessel functions, p 5, r_max 5, radial MLP [16, 16].
MaceLayout reduced_layout(std::vector<int> atomic_numbers, int num_interactions, int mlp_irreps) {
  MaceLayout c;
  c.atomic_numbers = std::move(atomic_numbers);
  c.r_max = 5.0;
  c.num_bessel = 8;
  c.num_polynomial_cutoff = 5;
  c.max_ell = 2;
  c.num_channels = 6;
  c.max_L = 1;
  c.correlation = {2};
  c.num_interactions = num_interactions;
  c.radial_mlp = {16, 16};
  c.mlp_irreps = mlp_irreps;
  return c;
}

// MACE-MPA-0's blocks at reduced width, as tests/reference/make_mace_fixtures.py built them with
// mace-torch: a Density first block, DensityResidual after it, the Agnesi transform, ZBL.
TEST(MaceLayout, WritesMaceTorchsTensorsForTheDensityAgnesiArchitecture) {
  const auto ref =
      io::read_potential_file(kData + "ssmace_2int_L1_corr2_ell3_density_agnesi_zbl.safetensors");
  MaceLayout c;
  c.atomic_numbers = {28, 13, 29};
  c.r_max = 5.5;
  c.num_bessel = 8;
  c.num_polynomial_cutoff = 5;
  c.max_ell = 3;
  c.num_channels = 6;
  c.max_L = 1;
  c.correlation = {2};
  c.num_interactions = 2;
  c.radial_mlp = {16, 16, 16};
  c.mlp_irreps = 8;
  c.avg_num_neighbors = 20.5;
  c.interaction_first = "RealAgnosticDensityInteractionBlock";
  c.interaction = "RealAgnosticDensityResidualInteractionBlock";
  c.distance_transform = "Agnesi";
  c.zbl = true;
  const auto ours = write_fixed(c);
  expect_mace_torchs_tensors(ref, ours);
  const auto hp = [](const io::PotentialFile& f, const std::string& key) {
    return f.metadata.at(nlohmann::json::json_pointer("/hyperparameters/" + key));
  };
  EXPECT_EQ(hp(ours, "distance_transform"), hp(ref, "distance_transform"));
  for (int t = 0; t < 2; ++t) {
    const std::string b = "interactions/" + std::to_string(t) + "/";
    for (const char* key : {"class", "node_feats_irreps", "target_irreps", "hidden_irreps"}) {
      EXPECT_EQ(hp(ours, b + key), hp(ref, b + key)) << b << key;
    }
    EXPECT_EQ(hp(ours, "products/" + std::to_string(t) + "/use_sc"),
              hp(ref, "products/" + std::to_string(t) + "/use_sc"));
  }

  // What the loader makes of it: the blocks, and AgnesiTransform's defaults with ASE's radii.
  const MaceSpec spec = load_mace_spec(ours, {});
  const MaceSpec spec_ref = load_mace_spec(ref, {});
  ASSERT_EQ(spec.interactions.size(), 2u);
  for (int t = 0; t < 2; ++t) {
    EXPECT_EQ(spec.interactions[t].density, spec_ref.interactions[t].density) << t;
    EXPECT_EQ(spec.interactions[t].residual, spec_ref.interactions[t].residual) << t;
  }
  EXPECT_TRUE(spec.distance_transform.active());
  EXPECT_EQ(spec.distance_transform.covalent_radii, spec_ref.distance_transform.covalent_radii);
  EXPECT_DOUBLE_EQ(spec.distance_transform.a, 1.0805);
  EXPECT_DOUBLE_EQ(spec.distance_transform.q, 0.9183);
  EXPECT_DOUBLE_EQ(spec.distance_transform.p, 4.5791);
}

// mace-torch's other radial bases and the Soft transform, as make_mace_fixtures.py built them: a
// Gaussian basis at the Soft-transformed distance, and a Chebyshev basis on a plain MACE. The
// writer gives mace-torch's tensors; the loader reads the same kind of basis from both files,
// the writer's at mace-torch's defaults (the fixtures perturb the centres and alpha).
TEST(MaceLayout, WritesMaceTorchsTensorsForTheGaussianSoftAndChebyshevBases) {
  MaceLayout g;
  g.atomic_numbers = {29, 13, 28};
  g.r_max = 5.0;
  g.num_bessel = 8;
  g.num_polynomial_cutoff = 6;
  g.max_ell = 2;
  g.num_channels = 6;
  g.max_L = 1;
  g.correlation = {2};
  g.radial_mlp = {16, 16, 16};
  g.mlp_irreps = 8;
  g.radial_type = "gaussian";
  g.distance_transform = "Soft";
  MaceLayout c = g;
  c.atomic_numbers = {28, 29};
  c.r_max = 4.5;
  c.num_bessel = 6;
  c.num_polynomial_cutoff = 5;
  c.radial_mlp = {16, 16};
  c.scale_shift = false;
  c.interaction_first = "RealAgnosticResidualInteractionBlock";
  c.radial_type = "chebyshev";
  c.distance_transform = "None";
  for (const auto& [layout, file] : {std::pair{g, std::string("ssmace_2int_L1_corr2_ell2_gaussian_soft")},
                                     std::pair{c, std::string("mace_2int_L1_corr2_ell2_chebyshev")}}) {
    SCOPED_TRACE(file);
    const auto ref = io::read_potential_file(kData + file + ".safetensors");
    const auto ours = write_fixed(layout);
    expect_mace_torchs_tensors(ref, ours);
    const MaceSpec spec = load_mace_spec(ours, {}), spec_ref = load_mace_spec(ref, {});
    EXPECT_EQ(spec.radial_basis.kind, spec_ref.radial_basis.kind);
    EXPECT_EQ(spec.radial_basis.gaussian_coeff, spec_ref.radial_basis.gaussian_coeff);
    EXPECT_EQ(spec.distance_transform.kind, spec_ref.distance_transform.kind);
    EXPECT_EQ(spec.distance_transform.covalent_radii, spec_ref.distance_transform.covalent_radii);
    if (layout.radial_type == "chebyshev") {
      EXPECT_EQ(spec.radial_basis.frequencies, spec_ref.radial_basis.frequencies);
    } else {
      EXPECT_EQ(
          spec.radial_basis.frequencies,
          kernels::RadialBasisParams::gaussian(layout.num_bessel, layout.r_max, layout.num_polynomial_cutoff)
              .frequencies);
      EXPECT_DOUBLE_EQ(spec.distance_transform.alpha, 4.0);
      EXPECT_NEAR(spec_ref.distance_transform.alpha, 4.0 * 1.07, 1e-12);
      // The converter now writes the model's own coefficient (a float32 model's differs from
      // the recomputed one); the loader takes it, and refuses one that is not negative.
      auto with_coeff = ref;
      with_coeff.metadata["hyperparameters"]["gaussian_coeff"] = -0.4321;
      EXPECT_EQ(load_mace_spec(with_coeff, {}).radial_basis.gaussian_coeff, -0.4321);
      with_coeff.metadata["hyperparameters"]["gaussian_coeff"] = 0.5;
      EXPECT_THROW(load_mace_spec(with_coeff, {}), InputError);
    }
  }
}

// use_last_readout_only (mace-torch >= 0.3.14), as make_mace_fixtures.py built it with mace-torch
// 0.3.16: one non-linear readout, on the last of three layers, stored as readouts.0. The writer
// gives mace-torch's tensors; the loader puts the readout on the last layer and the stage list
// has no readout stage on the others.
TEST(MaceLayout, WritesMaceTorchsTensorsForUseLastReadoutOnly) {
  const auto ref =
      io::read_potential_file(kData + "ssmace_3int_L1_corr2_ell2_density_lastreadout.safetensors");
  MaceLayout c = reduced_layout({13, 29, 28}, 3, 8);
  c.interaction_first = "RealAgnosticDensityInteractionBlock";
  c.interaction = "RealAgnosticDensityResidualInteractionBlock";
  c.distance_transform = "Agnesi";
  c.last_readout_only = true;
  const auto ours = write_fixed(c);
  expect_mace_torchs_tensors(ref, ours);
  EXPECT_TRUE(ours.contains("readouts.0.linear_2.weight"));
  EXPECT_FALSE(ours.contains("readouts.1.linear.weight"));

  for (const io::PotentialFile* f : {&ref, &ours}) {
    const MaceSpec spec = load_mace_spec(*f, {});
    EXPECT_TRUE(spec.last_readout_only);
    ASSERT_EQ(spec.readouts.size(), 3u);
    EXPECT_FALSE(spec.readouts[0].present);
    EXPECT_FALSE(spec.readouts[1].present);
    EXPECT_TRUE(spec.readouts[2].present);
    EXPECT_TRUE(spec.readouts[2].nonlinear);
    EXPECT_EQ(spec.readouts[2].prefix, "readouts.0.");
    std::vector<int> readout_layers;
    for (const Stage& s : stage_list(spec)) {
      if (s.kind == StageKind::Readout) {
        readout_layers.push_back(s.layer);
      }
    }
    EXPECT_EQ(readout_layers, std::vector<int>{2});
  }

  // A readout list that does not match the flag is refused, naming both.
  auto extra = ours;
  extra.metadata["hyperparameters"]["use_last_readout_only"] = false;
  expect_load_refused(extra, MaceOptions{},
                      "must list 3 readout(s) for 3 interaction(s) (one per layer), has 1");
  auto missing = ours;
  missing.metadata["hyperparameters"]["readouts"] = nlohmann::json::array();
  expect_load_refused(missing, MaceOptions{}, "with use_last_readout_only (one, on the last layer), has 0");
}

// MACE-MH-1's product and readout, as make_mace_fixtures.py built them with mace-torch 0.3.16
// (two heads): one set of contraction weights, [1, K, C], and the NonLinearBiasReadoutBlock's
// linear_mid and biases. A product's weights with the wrong number of sets are refused.
TEST(MaceLayout, WritesMaceTorchsTensorsForTheAgnosticProductAndBiasReadout) {
  const auto ref =
      io::read_potential_file(kData + "ssmace_2int_L1_corr2_ell2_agnostic_biasreadout.safetensors");
  MaceLayout c = reduced_layout({29, 13, 28}, 2, 6);
  c.interaction_first = "RealAgnosticResidualInteractionBlock";
  c.heads = {"omat_pbe", "Default"};
  c.agnostic_product = true;
  c.readout_bias = true;
  const auto ours = write_fixed(c);
  expect_mace_torchs_tensors(ref, ours);
  MaceOptions head;
  head.head = "Default";
  for (const io::PotentialFile* f : {&ref, &ours}) {
    const MaceSpec spec = load_mace_spec(*f, head);
    EXPECT_TRUE(spec.products[0].agnostic);
    EXPECT_TRUE(spec.products[1].agnostic);
    EXPECT_TRUE(spec.readouts[1].bias);
    EXPECT_FALSE(spec.readouts[0].bias);
    EXPECT_EQ(spec.readouts[1].b_2.size(), 2u);
  }

  auto flag_off = ours;
  flag_off.metadata["hyperparameters"]["products"][0].erase("agnostic");
  expect_load_refused(flag_off, head, "products.0.symmetric_contractions.contractions.0.weights_max");
}

// edge_irreps with use_edge_irreps_first (mace-torch >= 0.3.14; MACE-MH-1, OMOL), as
// make_mace_fixtures.py built them with mace-torch 0.3.16: linear_up maps the node features to
// 5x0e in the first layer and to 5x0e+3x1o+2x2e in the second, and the conv TP reads those.
TEST(MaceLayout, WritesMaceTorchsTensorsForEdgeIrreps) {
  const auto ref = io::read_potential_file(kData + "ssmace_2int_L1_corr2_ell2_edgeirreps.safetensors");
  MaceLayout c = reduced_layout({29, 13, 28}, 2, 6);
  c.interaction_first = "RealAgnosticResidualInteractionBlock";
  c.edge_irreps = "5x0e+3x1o+2x2e";
  c.edge_irreps_first = true;
  const auto ours = write_fixed(c);
  expect_mace_torchs_tensors(ref, ours);
  const std::vector<std::string> edge = {"5x0e", "5x0e+3x1o+2x2e"};
  for (const io::PotentialFile* f : {&ref, &ours}) {
    const auto& inter = f->metadata.at("hyperparameters").at("interactions");
    const MaceSpec spec = load_mace_spec(*f, {});
    for (int t = 0; t < 2; ++t) {
      EXPECT_EQ(inter.at(t).at("edge_irreps"), edge[t]) << t;
      EXPECT_EQ(inter.at(t).at("irreps_mid"), spec.interactions[t].tp.irreps_out.str()) << t;
      EXPECT_EQ(spec.interactions[t].edge.str(), edge[t]) << t;
      EXPECT_EQ(spec.interactions[t].tp.irreps1.str(), edge[t]) << t;
      EXPECT_EQ(spec.interactions[t].linear_up.irreps_out.str(), edge[t]) << t;
    }
  }
  // Without use_edge_irreps_first the first layer's linear_up is square and no key is written.
  c.edge_irreps_first = false;
  const auto square = write_fixed(c);
  EXPECT_FALSE(square.metadata["hyperparameters"]["interactions"][0].contains("edge_irreps"));
  EXPECT_EQ(load_mace_spec(square, {}).interactions[0].edge.str(), "6x0e");

  // edge_irreps that disagree with linear_up's weights are refused, naming the tensor.
  auto other = ours;
  other.metadata["hyperparameters"]["interactions"][1]["edge_irreps"] = "4x0e+3x1o+2x2e";
  expect_load_refused(other, MaceOptions{}, "interactions.1.linear_up.weight");
}

// MACE-MH-1's non-linear interaction block, as make_mace_fixtures.py built it with mace-torch
// 0.3.16 (with edge_irreps, apply_cutoff False, the agnostic product, the bias readout and two
// heads): the writer's tensors, and the hyperparameters the loader reads (the gate's slices, the
// MLPs' widths, irreps_nonlin), are the converter's.
TEST(MaceLayout, WritesMaceTorchsTensorsForTheNonLinearBlock) {
  const auto ref = io::read_potential_file(kData + "ssmace_2int_L1_corr2_ell2_mh1.safetensors");
  MaceLayout c = reduced_layout({29, 13, 28}, 2, 6);
  c.interaction_first = c.interaction = "RealAgnosticResidualNonLinearInteractionBlock";
  c.heads = {"omat_pbe", "Default"};
  c.edge_irreps = "5x0e+3x1o+2x2e";
  c.edge_irreps_first = true;
  c.apply_cutoff = false;
  c.agnostic_product = true;
  c.readout_bias = true;
  const auto ours = write_fixed(c);
  expect_mace_torchs_tensors(ref, ours);
  for (int t = 0; t < 2; ++t) {
    const auto& a = ours.metadata.at("hyperparameters").at("interactions").at(t);
    const auto& b = ref.metadata.at("hyperparameters").at("interactions").at(t);
    for (const char* key : {"class", "node_feats_irreps", "target_irreps", "hidden_irreps", "irreps_mid",
                            "irreps_nonlin", "radial_mlp", "density_mlp", "gate", "edge_irreps"}) {
      EXPECT_EQ(a.at(key), b.at(key)) << t << " " << key;
    }
    EXPECT_EQ(ours.metadata["hyperparameters"]["products"][t]["use_sc"], true);
  }
  MaceOptions head;
  head.head = "Default";
  for (const io::PotentialFile* f : {&ref, &ours}) {
    const MaceSpec spec = load_mace_spec(*f, head);
    for (int t = 0; t < 2; ++t) {
      const auto& I = spec.interactions[t];
      ASSERT_TRUE(I.nonlinear.has_value()) << t;
      EXPECT_TRUE(I.residual);
      EXPECT_EQ(I.skip.num_sets, 1);  // a plain Linear
      EXPECT_EQ(static_cast<int>(I.nonlinear->gate_source.size()), I.target.dim());
      EXPECT_EQ(I.nonlinear->radial.width_in(), 8);  // the basis; the species terms are folded
      EXPECT_EQ(I.nonlinear->radial_source.size(), 3u * 16u);
    }
  }
  // A gate that reads outside its input is refused, naming the key.
  auto bad = ours;
  bad.metadata["hyperparameters"]["interactions"][1]["gate"]["gated"][0][0] = 1000;
  expect_load_refused(bad, head, "interactions/1/gate");
}

// mace_run_train's --embedding_specs and --use_embedding_readout (MACE-OMOL), as
// make_mace_fixtures.py built them with mace-torch 0.3.16: a categorical charge and a continuous
// spin. The writer's tensors and `embeddings` are the converter's; bad specs are refused by name.
TEST(MaceLayout, WritesMaceTorchsTensorsForChargeAndSpinEmbeddings) {
  const auto ref = io::read_potential_file(kData + "ssmace_2int_L1_corr2_ell2_charge_spin.safetensors");
  MaceLayout c = reduced_layout({29, 13, 28}, 2, 6);
  c.interaction_first = "RealAgnosticResidualInteractionBlock";
  c.embedding_specs = {{"total_charge", "categorical", 4, 7, 3, true},
                       {"total_spin", "continuous", 3, 0, 0, true}};
  c.embedding_readout = true;
  const auto ours = write_fixed(c);
  expect_mace_torchs_tensors(ref, ours);
  EXPECT_EQ(ours.metadata["hyperparameters"]["embeddings"], ref.metadata["hyperparameters"]["embeddings"]);
  MaceOptions o;
  o.total_charge = -1.0;
  o.total_spin = 3.0;
  const MaceSpec spec = load_mace_spec(ours, o);
  EXPECT_EQ(spec.graph_features, (std::vector<std::string>{"total_charge", "total_spin"}));
  ASSERT_TRUE(spec.embedding_readout.has_value());
  EXPECT_EQ(spec.w_embedding_readout.size(), spec.embedding_irreps.dim() * spec.heads.size());
  // A readout without features, which mace-torch never builds, is refused where it is read.
  auto no_features = ours;
  no_features.metadata["hyperparameters"]["embeddings"]["features"].clear();
  try {
    load_mace_spec(no_features, MaceOptions{});
    ADD_FAILURE() << "a readout without features was accepted";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("a readout without features"), std::string::npos) << e.what();
  }

  const auto refused = expect_write_refused;
  MaceLayout b = c;
  b.embedding_specs[0].name = "temperature";
  refused(b, "feature 'temperature' is not supported; supported: total_charge, total_spin");
  b = c;
  b.embedding_specs[1].type = "fourier";
  refused(b, "total_spin: type 'fourier' is not supported");
  b = c;
  b.embedding_specs[0].num_classes = 0;
  refused(b, "total_charge: a categorical feature needs num_classes >= 1");
  b = c;
  b.embedding_specs.clear();
  refused(b, "use_embedding_readout needs embedding_specs");
}

TEST(MaceLayout, RefusesBlocksAndTransformsItDoesNotWriteNamingThem) {
  MaceLayout c;
  c.atomic_numbers = {29};
  const auto refused = expect_write_refused;
  MaceLayout b = c;
  b.interaction = "RealAgnosticAttResidualInteractionBlock";
  refused(b,
          "interaction 'RealAgnosticAttResidualInteractionBlock' is not supported; supported: "
          "RealAgnosticResidualInteractionBlock, RealAgnosticDensityResidualInteractionBlock, "
          "RealAgnosticResidualNonLinearInteractionBlock");
  b = c;
  b.interaction_first = "RealAgnosticAttResidualInteractionBlock";
  refused(b, "interaction_first 'RealAgnosticAttResidualInteractionBlock' is not supported");
  b = c;
  b.distance_transform = "Polynomial";
  refused(b, "distance_transform 'Polynomial' is not supported; supported: None, Agnesi, Soft");
  b = c;
  b.radial_type = "fourier";
  refused(b, "radial_type 'fourier' is not known; supported: bessel, gaussian, chebyshev");
  b = c;
  b.radial_type = "gaussian";
  b.num_bessel = 1;
  refused(b, "the Gaussian basis' coefficient");
  b = c;
  b.edge_irreps_first = true;
  refused(b, "use_edge_irreps_first needs edge_irreps");
  b.edge_irreps = "4x1o";
  refused(b, "use_edge_irreps_first gives the first interaction edge_irreps' scalars, and '4x1o' has no 0e");
  b = c;
  b.edge_irreps = "4y0e";
  refused(b, "edge_irreps '4y0e'");
}

}  // namespace
}  // namespace fastmlip::models::mace
