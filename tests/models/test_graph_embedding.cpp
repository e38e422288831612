// SPDX-License-Identifier: MIT
// The joint embedding of the total charge and spin (models/mace/graph_embedding.hpp), the one
// definition the loader folds and the trainer differentiates: its compute stage against a dense
// reference written from mace-torch's construction, its reverse stage against central finite
// differences, its Dual twins against finite differences of the plain stages (the trainer's double
// backward), and its refusals. Parity with mace-torch itself is test_mace_parity's (the loader)
// and test_mace_torch's (the trainer), on the charge/spin fixture.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "../common/tolerance.hpp"
#include "core/error.hpp"
#include "math/dual.hpp"
#include "models/mace/graph_embedding.hpp"

namespace fastmlip::models::mace {
namespace {

using Weights = std::vector<std::vector<double>>;

/// A categorical charge (7 classes, offset 3) and a continuous spin, with or without its biases,
/// into `channels` channels; odd widths.
GraphEmbedding embedding(int channels, bool spin_bias) {
  GraphEmbedding g;
  g.channels = channels;
  g.features = {{"total_charge", "categorical", 5, 7, 3, true},
                {"total_spin", "continuous", 3, 0, 0, spin_bias}};
  return g;
}

Weights random_weights(const GraphEmbedding& g, test::Uniform& u) {
  Weights w;
  for (const auto& t : g.tensors()) {
    std::size_t n = 1;
    for (const auto d : t.shape) {
      n *= static_cast<std::size_t>(d);
    }
    std::vector<double> v(n);
    for (auto& x : v) {
      x = u(-1.0, 1.0);
    }
    w.push_back(std::move(v));
  }
  return w;
}

double silu(double x) { return x / (1.0 + std::exp(-x)); }

/// s from the formula in graph_embedding.hpp, feature by feature, in double.
std::vector<double> reference(const GraphEmbedding& g, const Weights& w, double charge, double spin) {
  std::vector<double> concat;
  std::size_t k = 0;
  for (const auto& f : g.features) {
    const int n = f.emb_dim;
    const double v = f.name == "total_charge" ? charge : spin;
    if (f.type == "categorical") {
      const auto row = static_cast<std::size_t>(std::lround(v) + f.offset);
      for (int j = 0; j < n; ++j) {
        concat.push_back(w[k][row * n + j]);
      }
      ++k;
      continue;
    }
    const auto& W0 = w[k++];
    const std::vector<double> B0 = f.use_bias ? w[k++] : std::vector<double>(n, 0.0);
    const auto& W2 = w[k++];
    const std::vector<double> B2 = f.use_bias ? w[k++] : std::vector<double>(n, 0.0);
    for (int j = 0; j < n; ++j) {
      double e = B2[j];
      for (int m = 0; m < n; ++m) {
        e += W2[j * n + m] * silu(W0[m] * v + B0[m]);
      }
      concat.push_back(e);
    }
  }
  std::vector<double> s(static_cast<std::size_t>(g.channels));
  for (int c = 0; c < g.channels; ++c) {
    double z = 0;
    for (std::size_t m = 0; m < concat.size(); ++m) {
      z += w[k][c * concat.size() + m] * concat[m];
    }
    s[c] = silu(z);
  }
  return s;
}

template <class S>
std::vector<std::vector<S>> cast(const Weights& w) {
  std::vector<std::vector<S>> out;
  for (const auto& v : w) {
    out.emplace_back(v.begin(), v.end());
  }
  return out;
}
template <class S>
std::vector<const S*> pointers(const std::vector<std::vector<S>>& w) {
  std::vector<const S*> p;
  for (const auto& v : w) {
    p.push_back(v.data());
  }
  return p;
}
template <class S>
std::vector<S*> pointers(std::vector<std::vector<S>>& w) {
  std::vector<S*> p;
  for (auto& v : w) {
    p.push_back(v.data());
  }
  return p;
}

template <class S>
std::vector<S> compute(const GraphEmbedding& g, const std::vector<std::vector<S>>& w, double q, double sp) {
  std::vector<S> s(static_cast<std::size_t>(g.channels));
  compute_graph_embedding<S>(g, pointers(w), q, sp, s.data());
  return s;
}

template <class S>
std::vector<std::vector<S>> reverse(const GraphEmbedding& g, const std::vector<std::vector<S>>& w, double q,
                                    double sp, const std::vector<S>& gs) {
  std::vector<std::vector<S>> grads;
  for (const auto& v : w) {
    grads.emplace_back(v.size(), S(0));
  }
  reverse_graph_embedding<S>(g, pointers(w), q, sp, gs.data(), pointers(grads));
  return grads;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    s += a[i] * b[i];
  }
  return s;
}

/// (charge, spin) pairs across the table (its ends included) and spins of both signs.
const std::vector<std::pair<double, double>> kValues{{-3, 1}, {0, 0.5}, {3, -2.25}, {1, 4}};

template <class T>
class GraphEmbeddingTest : public ::testing::Test {};
using Precisions = ::testing::Types<float, double>;
TYPED_TEST_SUITE(GraphEmbeddingTest, Precisions);

TYPED_TEST(GraphEmbeddingTest, ComputeMatchesTheReference) {
  using T = TypeParam;
  test::Uniform u(71);
  for (const int C : {1, 13}) {
    for (const bool bias : {true, false}) {
      const GraphEmbedding g = embedding(C, bias);
      ASSERT_EQ(g.problem(), "");
      const Weights w = random_weights(g, u);
      for (const auto& [q, sp] : kValues) {
        const auto want = reference(g, w, q, sp);
        const auto got = compute<T>(g, cast<T>(w), q, sp);
        for (int c = 0; c < C; ++c) {
          EXPECT_NEAR(got[c], want[c], test::Tolerance<T>::kernel * 10)
              << "C " << C << (bias ? " bias" : " no bias") << " charge " << q << " spin " << sp
              << " channel " << c;
        }
      }
    }
  }
}

// d sum(s * gs) / dw for every weight against central differences of the reference in double.
TYPED_TEST(GraphEmbeddingTest, ReverseMatchesFiniteDifferences) {
  using T = TypeParam;
  test::Uniform u(72);
  const double h = 1e-6;
  for (const bool bias : {true, false}) {
    const GraphEmbedding g = embedding(13, bias);
    const auto names = g.tensors();
    Weights w = random_weights(g, u);
    for (const auto& [q, sp] : kValues) {
      std::vector<double> gs(13);
      for (auto& x : gs) {
        x = u(-1.0, 1.0);
      }
      const auto grads = reverse<T>(g, cast<T>(w), q, sp, std::vector<T>(gs.begin(), gs.end()));
      for (std::size_t k = 0; k < w.size(); ++k) {
        for (std::size_t i = 0; i < w[k].size(); ++i) {
          const double keep = w[k][i];
          w[k][i] = keep + h;
          const double up = dot(reference(g, w, q, sp), gs);
          w[k][i] = keep - h;
          const double down = dot(reference(g, w, q, sp), gs);
          w[k][i] = keep;
          const double fd = (up - down) / (2 * h);
          const double tol = std::is_same_v<T, float> ? 1e-5 : test::Tolerance<double>::fd;
          EXPECT_NEAR(grads[k][i], fd, tol)
              << names[k].name << "[" << i << "], charge " << q << " spin " << sp << (bias ? "" : " no bias");
        }
      }
    }
  }
}

// The trainer's double backward runs both stages on w + eps a: the output's tangent is the
// Jacobian-vector product, the gradients' tangents the Hessian-vector product. Both against
// central differences along a of the double stages.
TYPED_TEST(GraphEmbeddingTest, DualStagesGiveTheDirectionalDerivatives) {
  using T = TypeParam;
  using D = Dual<T>;
  test::Uniform u(73);
  const double h = 1e-5;
  const GraphEmbedding g = embedding(13, true);
  const Weights w = random_weights(g, u), a = random_weights(g, u);
  const auto step = [&](double t) {
    Weights x = w;
    for (std::size_t k = 0; k < x.size(); ++k) {
      for (std::size_t i = 0; i < x[k].size(); ++i) {
        x[k][i] += t * a[k][i];
      }
    }
    return x;
  };
  std::vector<std::vector<D>> wd;
  for (std::size_t k = 0; k < w.size(); ++k) {
    std::vector<D> v;
    for (std::size_t i = 0; i < w[k].size(); ++i) {
      v.emplace_back(static_cast<T>(w[k][i]), static_cast<T>(a[k][i]));
    }
    wd.push_back(std::move(v));
  }
  const double tol = std::is_same_v<T, float> ? 2e-4 : 1e-7;
  for (const auto& [q, sp] : kValues) {
    std::vector<double> gs(13);
    for (auto& x : gs) {
      x = u(-1.0, 1.0);
    }
    const auto s = compute<D>(g, wd, q, sp);
    const auto up = compute<double>(g, step(h), q, sp), down = compute<double>(g, step(-h), q, sp);
    for (std::size_t c = 0; c < s.size(); ++c) {
      EXPECT_NEAR(tangent_of(s[c]), (up[c] - down[c]) / (2 * h), tol) << "jvp channel " << c;
    }
    const auto gd = reverse<D>(g, wd, q, sp, std::vector<D>(gs.begin(), gs.end()));
    const auto gup = reverse<double>(g, step(h), q, sp, gs), gdown = reverse<double>(g, step(-h), q, sp, gs);
    for (std::size_t k = 0; k < gd.size(); ++k) {
      for (std::size_t i = 0; i < gd[k].size(); ++i) {
        EXPECT_NEAR(tangent_of(gd[k][i]), (gup[k][i] - gdown[k][i]) / (2 * h), tol)
            << "hvp " << g.tensors()[k].name << "[" << i << "]";
      }
    }
  }
}

TEST(GraphEmbedding, ValuesItCannotEmbedAreRefusedByName) {
  const GraphEmbedding g = embedding(4, true);
  EXPECT_EQ(g.value_problem(-3, 1), "");
  EXPECT_EQ(g.value_problem(4, 1),
            "total_charge 4 is not one the model embeds: it knows the integers -3 to 3");
  EXPECT_EQ(g.value_problem(-4, 1),
            "total_charge -4 is not one the model embeds: it knows the integers -3 to 3");
  EXPECT_EQ(g.value_problem(0.5, 1),
            "total_charge 0.5 is not one the model embeds: it knows the integers -3 to 3");
  EXPECT_EQ(g.value_problem(0, std::numeric_limits<double>::quiet_NaN()),
            "total_spin nan is not a finite number");
  // The stages never index outside the table.
  test::Uniform u(74);
  const auto w = cast<double>(random_weights(g, u));
  EXPECT_THROW(compute<double>(g, w, 7, 1), InputError);
  EXPECT_THROW(reverse<double>(g, w, 7, 1, std::vector<double>(4, 1.0)), InputError);
  // Too few weights is an error, not a bad read.
  auto fewer = w;
  fewer.pop_back();
  EXPECT_THROW(compute<double>(g, fewer, 0, 1), InputError);
}

TEST(GraphEmbedding, ReadsWhatItWritesAndRefusesFeaturesItDoesNotCompute) {
  const GraphEmbedding g = embedding(6, false);
  const GraphEmbedding back = GraphEmbedding::read({{"features", g.features_json()}}, 6, "x.safetensors");
  ASSERT_EQ(back.features.size(), 2u);
  EXPECT_EQ(back.features_json(), g.features_json());
  EXPECT_EQ(back.features[0].offset, 3);
  EXPECT_FALSE(back.features[1].use_bias);
  std::vector<std::string> names;
  for (const auto& t : back.tensors()) {
    names.push_back(t.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"joint_embedding.embedders.total_charge.weight",
                                             "joint_embedding.embedders.total_spin.0.weight",
                                             "joint_embedding.embedders.total_spin.2.weight",
                                             "joint_embedding.project.0.weight"}));
  EXPECT_EQ(back.tensors().back().shape, (std::vector<std::int64_t>{6, 8}));
  // A model without the embedding has none of its tensors (the trainer once asked every model
  // for the projection).
  EXPECT_TRUE(GraphEmbedding{}.tensors().empty());

  const auto refused = [](const nlohmann::json& features, const std::string& expected) {
    try {
      GraphEmbedding::read({{"features", features}}, 6, "x.safetensors");
      ADD_FAILURE() << "not refused: " << features.dump();
    } catch (const UnsupportedError& e) {
      EXPECT_NE(std::string(e.what()).find(expected), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find("x.safetensors"), std::string::npos) << e.what();
    }
  };
  refused({{{"name", "temperature"}, {"type", "continuous"}, {"emb_dim", 2}}}, "feature 'temperature'");
  refused({{{"name", "total_spin"}, {"type", "fourier"}, {"emb_dim", 2}}}, "type 'fourier'");
  refused({{{"name", "total_spin"}, {"type", "continuous"}, {"emb_dim", 2}, {"in_dim", 3}}}, "in_dim");
  refused({{{"name", "total_charge"}, {"type", "categorical"}, {"emb_dim", 2}}}, "num_classes");
  refused({{{"name", "total_spin"}, {"type", "continuous"}, {"emb_dim", 0}}}, "emb_dim must be positive");
}

}  // namespace
}  // namespace fastmlip::models::mace
