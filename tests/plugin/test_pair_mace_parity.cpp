// SPDX-License-Identifier: MIT
// pair_style fastmlip/mace against mace-torch, through LAMMPS: every committed fixture model
// (tests/reference/data/mace/index.json, made by tests/reference/make_mace_fixtures.py) on every
// fixture structure and head, built as a LAMMPS system from the fixture's cell and positions.
// Energy, per-atom energies, forces by atom id and the virial must match mace-torch's to 1e-9
// relative in double precision (float32: 1e-4). On several ranks the same holds, so this also
// covers the layer-by-layer ghost exchange of every architecture.
#include <nlohmann/json.hpp>

#include <string>

#include "mace_parity.hpp"

namespace {

using namespace fastmlip_test;
using nlohmann::json;

const std::string kMaceData = std::string(FASTMLIP_SOURCE_DIR) + "/tests/reference/data/mace";

TEST(PairMaceParityData, AtLeastSixCommittedModels) { EXPECT_GE(committed_models(kMaceData).size(), 6u); }

class PairMaceParity : public ::testing::TestWithParam<json> {};

TEST_P(PairMaceParity, Float64MatchesMaceTorch) { check_model(kMaceData, GetParam(), {1e-9, "float64"}); }

TEST_P(PairMaceParity, Float32MatchesMaceTorch) { check_model(kMaceData, GetParam(), {1e-4, "float32"}); }

INSTANTIATE_TEST_SUITE_P(Models, PairMaceParity, ::testing::ValuesIn(committed_models(kMaceData)),
                         [](const ::testing::TestParamInfo<json>& info) {
                           return info.param.at("name").get<std::string>();
                         });

}  // namespace
