// SPDX-License-Identifier: MIT
// MACE's stage list (models/mace/mace_stages.hpp): the wiring both executors run, read from the
// committed potential files of every block combination the converter writes.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "io/potential_file.hpp"
#include "models/mace/mace_model.hpp"
#include "models/mace/mace_spec.hpp"
#include "models/mace/mace_stages.hpp"

namespace fastmlip::models::mace {
namespace {

MaceSpec spec_of(const std::string& name) {
  const auto file = io::read_potential_file(std::string(FASTMLIP_REFERENCE_DATA_DIR) + "/mace/" + name);
  return load_mace_spec(file, MaceOptions{});
}

std::vector<std::string> described(const std::vector<Stage>& stages) {
  std::vector<std::string> out;
  for (const auto& s : stages) {
    out.push_back(describe(s));
  }
  return out;
}

// MACE-MP's shape: a non-residual first block (skip_tp on the message), residual blocks after.
TEST(MaceStages, MaceMpWiring) {
  const MaceSpec spec = spec_of("mp_small.safetensors");
  ASSERT_EQ(spec.num_interactions, 2);
  ASSERT_FALSE(spec.zbl);
  const std::vector<std::string> expected = {
      "edge basis: Y, B",
      "embedding -> x0",
      "linear_up(x0) -> h0",
      "conv_tp(h0, Y, B) -> A0",
      "linear(A0) -> l0",
      "skip_tp(l0) -> m0",
      "product(m0) -> x1",
      "readout(x1) -> energy",
      "linear_up(x1) -> h1",
      "exchange h1",
      "conv_tp(h1, Y, B) -> A1",
      "linear(A1) -> m1",
      "skip_tp(x1) -> s1",
      "product(m1) -> x2",
      "x2 += s1",
      "readout(x2) -> energy",
      "node energy",
  };
  EXPECT_EQ(described(stage_list(spec)), expected);
}

// A residual first block and ZBL: the self-connection of x0 is added after the first product.
TEST(MaceStages, ResidualFirstWithZbl) {
  const MaceSpec spec = spec_of("mace_2int_L1_corr2_ell2_zbl_residualfirst.safetensors");
  const auto list = described(stage_list(spec));
  ASSERT_GE(list.size(), 9u);
  EXPECT_EQ(list[2], "zbl -> pair energy");
  EXPECT_EQ(list[3], "linear_up(x0) -> h0");
  EXPECT_EQ(list[5], "linear(A0) -> m0");
  EXPECT_EQ(list[6], "skip_tp(x0) -> s0");
  EXPECT_EQ(list[7], "product(m0) -> x1");
  EXPECT_EQ(list[8], "x1 += s0");
}

// MACE-MH-1's non-linear block: linear_1 with the density normalisation, the residual from the
// senders, the gate and linear_2 before the product; the plain-Linear skip of x_t after it.
TEST(MaceStages, NonLinearBlockWiring) {
  const MaceSpec spec = spec_of("ssmace_2int_L1_corr2_ell2_mh1.safetensors");
  const auto list = described(stage_list(spec));
  const std::vector<std::string> layer0 = {"linear_up(x0) -> h0",
                                           "conv_tp(h0, Y, B) -> A0",
                                           "linear(A0) -> l0",
                                           "linear_res(h0) -> u0",
                                           "u0 += l0",
                                           "gate(u0) -> g0",
                                           "linear_2(g0) -> m0",
                                           "skip_tp(x0) -> s0",
                                           "product(m0) -> x1",
                                           "x1 += s0",
                                           "readout(x1) -> energy"};
  ASSERT_GE(list.size(), 2 + layer0.size());
  EXPECT_EQ(std::vector<std::string>(list.begin() + 2, list.begin() + 2 + layer0.size()), layer0);
  const StageGraph g(stage_list(spec));
  EXPECT_EQ(g.consumers({Value::Senders, 1}), 2);       // the convolution and linear_res
  EXPECT_TRUE(g.needs_adjoint({Value::GateInput, 0}));  // u0 = linear_res(h0) + l0: l0 depends on B
  EXPECT_FALSE(g.needs_adjoint({Value::Senders, 0}));   // h0: species only
  EXPECT_EQ(slot_width(spec, {Value::GateInput, 1}), spec.interactions[1].nonlinear->nonlin.dim());
  EXPECT_EQ(slot_width(spec, {Value::GateOutput, 1}), spec.interactions[1].target.dim());
}

// What the reverse pass needs from the list: how many stages read each slot, and which slots
// depend on the species only (their adjoints are never formed).
TEST(MaceStages, ConsumersAndAdjoints) {
  const MaceSpec spec = spec_of("mace_2int_L1_corr2_ell2_zbl_residualfirst.safetensors");
  const StageGraph g(stage_list(spec));
  EXPECT_EQ(g.consumers({Value::Features, 0}), 2);  // linear_up, skip_tp
  EXPECT_EQ(g.consumers({Value::Features, 1}), 3);  // readout 0, linear_up, skip_tp
  EXPECT_EQ(g.consumers({Value::Features, 2}), 1);  // the last readout
  EXPECT_EQ(g.consumers({Value::Senders, 1}), 1);   // the exchange works in place
  EXPECT_EQ(g.consumers({Value::Messages, 0}), 1);
  EXPECT_FALSE(g.needs_adjoint({Value::Features, 0}));
  EXPECT_FALSE(g.needs_adjoint({Value::Senders, 0}));
  EXPECT_FALSE(g.needs_adjoint({Value::SelfConnection, 0}));  // skip_tp(x0): species only
  EXPECT_TRUE(g.needs_adjoint({Value::Messages, 0}));
  EXPECT_TRUE(g.needs_adjoint({Value::Features, 1}));  // x1 = product(..) + s0
  EXPECT_TRUE(g.needs_adjoint({Value::Senders, 1}));
  EXPECT_TRUE(g.needs_adjoint({Value::SelfConnection, 1}));
  EXPECT_EQ(g.max_exchange_width(spec), spec.interactions[1].node_feats.dim());
}

// Every committed model: each stage reads a slot an earlier stage wrote, with the widths the
// kernels of both stages agree on, and the list ends with the node energies.
TEST(MaceStages, EveryInputIsWrittenEarlierWithItsWidth) {
  for (const char* name :
       {"mace_1int_L0_corr1_ell1.safetensors", "mace_2int_L1_corr2_ell2_zbl_residualfirst.safetensors",
        "mace_3int_L2_corr3_ell2_nonresidual.safetensors", "mp_small.safetensors", "mp_medium.safetensors",
        "ssmace_2int_L1_corr2_ell2_3el.safetensors", "ssmace_2int_L1_corr2_ell3_zbl.safetensors",
        "ssmace_multihead_3int_L2_corr2.safetensors", "ssmace_2int_L1_corr2_ell2_mh1.safetensors"}) {
    SCOPED_TRACE(name);
    const MaceSpec spec = spec_of(name);
    const auto list = stage_list(spec);
    std::vector<Slot> written;
    int readouts = 0;
    for (const Stage& s : list) {
      SCOPED_TRACE(describe(s));
      if (reads_slot(s.kind)) {
        bool found = false;
        for (const Slot& w : written) {
          found = found || w == s.in;
        }
        EXPECT_TRUE(found);
      }
      if (writes_slot(s.kind)) {
        written.push_back(s.out);
      }
      if (s.kind == StageKind::Readout) {
        EXPECT_EQ(s.in, (Slot{Value::Features, s.layer + 1}));
        EXPECT_EQ(spec.readouts[s.layer].linear_1.irreps_in.dim(), slot_width(spec, s.in));
        ++readouts;
      }
      if (s.kind == StageKind::LinearUp) {
        EXPECT_EQ(spec.interactions[s.layer].linear_up.irreps_in.dim(), slot_width(spec, s.in));
      }
      if (s.kind == StageKind::Product) {
        EXPECT_EQ(spec.products[s.layer].sc.irreps_in.dim(), slot_width(spec, s.in));
        EXPECT_EQ(spec.products[s.layer].linear.irreps_out.dim(), slot_width(spec, s.out));
      }
      if (s.kind == StageKind::SkipTP) {
        EXPECT_EQ(spec.interactions[s.layer].skip.irreps_in.dim(), slot_width(spec, s.in));
        EXPECT_EQ(spec.interactions[s.layer].skip.irreps_out.dim(), slot_width(spec, s.out));
      }
    }
    EXPECT_EQ(readouts, spec.num_interactions);
    EXPECT_EQ(list.front().kind, StageKind::EdgeBasis);
    EXPECT_EQ(list.back().kind, StageKind::NodeEnergy);
  }
}

}  // namespace
}  // namespace fastmlip::models::mace
