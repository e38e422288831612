// SPDX-License-Identifier: MIT
// The output layer of train-potential, by hand on small inputs:
//  * metrics: RMSE/MAE of energy per atom, forces, stress (-virials / volume) and virials per
//    atom, overall and per config_type, the mean batch loss, NaN/null without data;
//  * the progress line (bar, counts, elapsed time and ETA);
//  * the learning-curve SVG: well-formed tags, one polyline per series with data, its points.
#include <gtest/gtest.h>

#include <cmath>
#include <regex>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "train/learning_curve.hpp"
#include "train/metrics.hpp"
#include "train/progress.hpp"
#include "train/run.hpp"

namespace fastmlip::test {
namespace {

using trainer::data::Config;
using namespace trainer::train;

Config make_config(int natoms, std::string type) {
  Config c;
  c.atomic_numbers.assign(static_cast<std::size_t>(natoms), 29);
  c.positions.assign(3 * static_cast<std::size_t>(natoms), 0.0);
  c.config_type = std::move(type);
  return c;
}

TEST(TrainOutput, MetricsByHand) {
  // A: 2 atoms, energy error 0.4 (0.2 per atom), force errors 0.1 and -0.2.
  Config a = make_config(2, "A");
  a.energy = 1.0;
  a.forces = {1, 0, 0, 0, 0, 0};
  const std::vector<double> fa = {1.1, 0, 0, 0, -0.2, 0};
  // B: 1 atom in a cube of side 2 (volume 8), energy error -0.3, force error 0.3; predicted
  // virials 8 on the diagonal, i.e. stress -1 against a label of -0.5, virials against 4.
  Config b = make_config(1, "B");
  b.energy = -1.0;
  b.forces = {0, 0, 0};
  b.cell = std::array<double, 9>{2, 0, 0, 0, 2, 0, 0, 0, 2};
  b.pbc = {true, true, true};
  b.stress = std::array<double, 9>{-0.5, 0, 0, 0, -0.5, 0, 0, 0, -0.5};
  b.virials = std::array<double, 9>{4, 0, 0, 0, 4, 0, 0, 0, 4};
  const std::vector<double> fb = {0.3, 0, 0};
  const std::array<double, 9> vb = {8, 0, 0, 0, 8, 0, 0, 0, 8};

  ErrorAccumulator acc(config_types_of({b, a}));
  ASSERT_EQ(acc.config_types(), (std::vector<std::string>{"A", "B"}));
  acc.add(a, {1.4, fa.data(), nullptr});
  acc.add(b, {-1.3, fb.data(), vb.data()});
  acc.add_loss(1.0);
  acc.add_loss(3.0);

  const Metrics m = metrics_of(acc.overall());
  EXPECT_EQ(m.configs, 2);
  EXPECT_DOUBLE_EQ(m.loss, 2.0);
  EXPECT_EQ(m.n_e, 2);
  EXPECT_DOUBLE_EQ(m.rmse_e, std::sqrt((0.04 + 0.09) / 2));
  EXPECT_DOUBLE_EQ(m.mae_e, 0.25);
  EXPECT_EQ(m.n_f, 9);
  EXPECT_DOUBLE_EQ(m.rmse_f, std::sqrt((0.01 + 0.04 + 0.09) / 9));
  EXPECT_DOUBLE_EQ(m.mae_f, 0.6 / 9);
  EXPECT_EQ(m.n_s, 9);
  EXPECT_DOUBLE_EQ(m.rmse_s, std::sqrt(3 * 0.25 / 9));
  EXPECT_DOUBLE_EQ(m.mae_s, 1.5 / 9);
  EXPECT_EQ(m.n_v, 9);
  EXPECT_DOUBLE_EQ(m.rmse_v, std::sqrt(3 * 16.0 / 9));
  EXPECT_DOUBLE_EQ(m.mae_v, 12.0 / 9);

  const Metrics ma = metrics_of(acc.of_type("A"));
  EXPECT_EQ(ma.configs, 1);
  EXPECT_NEAR(ma.rmse_e, 0.2, 1e-15);
  EXPECT_DOUBLE_EQ(ma.rmse_f, std::sqrt(0.05 / 6));
  EXPECT_TRUE(std::isnan(ma.rmse_s));
  EXPECT_TRUE(std::isnan(ma.loss));  // losses are per batch, counted overall only
  const Metrics mb = metrics_of(acc.of_type("B"));
  EXPECT_NEAR(mb.mae_e, 0.3, 1e-15);
  EXPECT_DOUBLE_EQ(mb.mae_f, 0.1);
  EXPECT_DOUBLE_EQ(mb.rmse_s, m.rmse_s);

  // JSON: null where there is no data; the table: one row per type, stress and virial columns.
  const nlohmann::json j = metrics_json(acc);
  EXPECT_DOUBLE_EQ(j["overall"]["mae_e_per_atom"].get<double>(), 0.25);
  EXPECT_TRUE(j["per_config_type"]["A"]["rmse_stress"].is_null());
  EXPECT_EQ(j["per_config_type"]["B"]["n_virial_components"].get<long long>(), 9);
  const std::string table = metrics_table(acc);
  EXPECT_NE(table.find("RMSE S"), std::string::npos) << table;
  EXPECT_NE(table.find("RMSE V/atom"), std::string::npos) << table;
  EXPECT_NE(table.find("250.000"), std::string::npos) << table;  // MAE E/atom in meV

  // flat() and set_flat() carry every sum (a checkpoint within an epoch stores them).
  ErrorAccumulator copy(acc.config_types());
  copy.set_flat(acc.flat());
  EXPECT_EQ(copy.flat(), acc.flat());
  EXPECT_EQ(metrics_json(copy), j);
  EXPECT_THROW(ErrorAccumulator({"A"}).set_flat(acc.flat()), InputError);

  // Without predicted virials there is no stress or virial error; an unknown type is an error.
  ErrorAccumulator no_v({"B"});
  no_v.add(b, {-1.0, fb.data(), nullptr});
  EXPECT_EQ(metrics_of(no_v.overall()).n_s, 0);
  EXPECT_EQ(metrics_table(no_v).find("RMSE S"), std::string::npos);
  EXPECT_THROW(no_v.add(a, {0.0, fa.data(), nullptr}), InputError);
  const Metrics empty = metrics_of(ErrorAccumulator().overall());
  EXPECT_TRUE(std::isnan(empty.rmse_e) && std::isnan(empty.mae_f) && std::isnan(empty.loss));
}

// Magmom errors (CHGNet): counted for frames with magmom labels and a magmom prediction only,
// and in the JSON only when counted.
TEST(TrainOutput, MagmomMetricsByHand) {
  Config a = make_config(2, "A");
  a.magmoms = {1.0, 0.5};
  Config b = make_config(1, "A");  // no magmom label
  const std::vector<double> ma = {1.3, 0.1}, mb = {2.0};
  ErrorAccumulator acc(config_types_of({a}));
  EXPECT_TRUE(metrics_json(acc).at("overall").count("rmse_magmom") == 0);
  Prediction pa{0.0, nullptr, nullptr, ma.data()};
  Prediction pb{0.0, nullptr, nullptr, mb.data()};
  acc.add(a, pa);
  acc.add(b, pb);
  acc.add(a, {0.0, nullptr, nullptr});  // no prediction: not counted
  const Metrics m = metrics_of(acc.overall());
  EXPECT_EQ(m.n_m, 2);
  EXPECT_DOUBLE_EQ(m.rmse_m, std::sqrt((0.09 + 0.16) / 2));
  EXPECT_DOUBLE_EQ(m.mae_m, 0.35);
  const auto j = metrics_json(acc).at("overall");
  EXPECT_EQ(j.at("n_magmoms").get<int>(), 2);
  EXPECT_DOUBLE_EQ(j.at("mae_magmom").get<double>(), 0.35);
}

TEST(TrainOutput, ProgressLine) {
  EXPECT_EQ(progress_line(0, 40, 0.0, 10), "[          ]  0/40   0%  0:00 elapsed, ETA --:--");
  EXPECT_EQ(progress_line(10, 40, 30.0, 10), "[==>       ] 10/40  25%  0:30 elapsed, ETA 1:30");
  EXPECT_EQ(progress_line(40, 40, 3700.0, 10), "[==========] 40/40 100%  1:01:40 elapsed, ETA 0:00");
  EXPECT_EQ(progress_line(1, 3, 2.0, 6), "[==>   ] 1/3  33%  0:02 elapsed, ETA 0:04");
}

/// Checks that every tag is closed in order (a small well-formedness test: no DTD, no entities).
void expect_balanced_tags(const std::string& xml) {
  std::vector<std::string> stack;
  std::size_t pos = 0;
  while ((pos = xml.find('<', pos)) != std::string::npos) {
    const std::size_t end = xml.find('>', pos);
    ASSERT_NE(end, std::string::npos) << "unterminated tag at " << pos;
    const std::string tag = xml.substr(pos + 1, end - pos - 1);
    pos = end + 1;
    if (tag.empty() || tag[0] == '?') {
      continue;
    }
    if (tag[0] == '/') {
      ASSERT_FALSE(stack.empty()) << "stray </" << tag << ">";
      EXPECT_EQ(stack.back(), tag.substr(1));
      stack.pop_back();
    } else if (tag.back() != '/') {
      stack.push_back(tag.substr(0, tag.find(' ')));
    }
  }
  EXPECT_TRUE(stack.empty());
}

TEST(TrainOutput, LearningCurveSvg) {
  const double nan = std::nan("");
  const std::vector<CurvePanel> panels = {
      {"loss",
       {{"train", "#1f77b4", {1, 2, 3, 4}, {10, 5, 2, 1}},
        {"valid <&>", "#d62728", {1, 2, 3, 4}, {12, nan, 3, 0.5}}}},
      {"RMSE F (meV/A)",
       {{"train", "#1f77b4", {1, 2, 3, 4}, {900, 400, 300, 200}}, {"valid", "#d62728", {}, {}}}}};
  const std::string svg = learning_curve_svg(panels);
  EXPECT_EQ(svg.rfind("<?xml", 0), 0u);
  EXPECT_NE(svg.find("<svg xmlns=\"http://www.w3.org/2000/svg\""), std::string::npos);
  EXPECT_NE(svg.find("valid &lt;&amp;&gt;"), std::string::npos);
  expect_balanced_tags(svg);
  // One polyline per series with data (the empty one has none), NaN left out.
  const std::regex poly("<polyline[^>]*points=\"([^\"]*)\"");
  std::vector<int> counts;
  for (auto it = std::sregex_iterator(svg.begin(), svg.end(), poly); it != std::sregex_iterator(); ++it) {
    const std::string pts = (*it)[1];
    counts.push_back(static_cast<int>(std::count(pts.begin(), pts.end(), ',')));
  }
  EXPECT_EQ(counts, (std::vector<int>{4, 3, 4}));
  // The log axis spans whole decades: 0.5 .. 12 gives 1e-1 .. 1e2.
  EXPECT_NE(svg.find(">1e-1<"), std::string::npos);
  EXPECT_NE(svg.find(">1e2<"), std::string::npos);
}

// A step that runs out of memory (run.cpp's guard around each bin's step): the rank, the device,
// the epoch and step, the bin, the allocator's words, what to do and the last checkpoint.
TEST(TrainOutput, OutOfMemoryInAStepNamesTheBinAndTheCheckpoint) {
  trainer::train::StepMemoryContext c;
  c.device = "cuda:1";
  c.rank = 3;
  c.epoch = 4;
  c.step = 17;
  c.graphs = 6;
  c.atoms = 431;
  c.batch_capacity = 512;
  c.checkpoint = "run/checkpoints/m.ckpt";
  const std::string msg =
      trainer::train::step_out_of_memory(c, "CUDA out of memory. Tried to allocate 2.00 GiB\n").what();
  EXPECT_EQ(
      msg,
      "train-potential: rank 3 ran out of cuda:1 memory in epoch 4, step 17 (a bin of 6 graphs and 431 "
      "atoms; "
      "CUDA out of memory. Tried to allocate 2.00 GiB). A bin's activations grow with its atoms and edges: "
      "use a smaller --batch_capacity (now 512 atoms; --accumulate_bins keeps the global batch), or "
      "--default_dtype float32. The last checkpoint, run/checkpoints/m.ckpt, is intact: continue with "
      "--restart run/checkpoints/m.ckpt.");
  c.validation = true;
  c.single = true;
  c.checkpoint.clear();
  const std::string v = trainer::train::step_out_of_memory(c, "std::bad_alloc").what();
  EXPECT_NE(v.find("ran out of cuda:1 memory validating in epoch 4 (a bin of 6 graphs"), std::string::npos)
      << v;
  EXPECT_NE(v.find("keeps the global batch). No checkpoint had been written yet."), std::string::npos) << v;
  EXPECT_EQ(v.find("float32"), std::string::npos) << "already float32: " << v;
}

}  // namespace
}  // namespace fastmlip::test
