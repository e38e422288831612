// SPDX-License-Identifier: MIT
// mace-torch's joint embedding of the total charge and spin (graph_embedding.hpp), mace-torch
// 0.3.16 modules/embeddings.py GenericJointEmbedding, from its documented construction: the
// embedders in the features' order, their outputs concatenated, projected without bias, SiLU.
#include "models/mace/graph_embedding.hpp"

#include <algorithm>
#include <cmath>
#include <sstream>

#include "core/error.hpp"
#include "math/dual.hpp"

namespace fastmlip::models::mace {

namespace {

template <class S>
S silu(S z) {
  using std::exp;  // and fastmlip::exp for Dual, by argument-dependent lookup
  return z / (S(1) + exp(-z));
}
template <class S>
S silu_derivative(S z) {
  using std::exp;
  const S s = S(1) / (S(1) + exp(-z));
  return s * (S(1) + z * (S(1) - s));
}

/// A charge or spin as a user wrote it: an integer without decimals, else the shortest exact text.
std::string format_value(double v) {
  if (v == std::trunc(v) && std::abs(v) < 1e15) {
    return std::to_string(static_cast<long long>(v));
  }
  std::ostringstream os;
  os.precision(17);
  os << v;
  return os.str();
}

double value_of_feature(const MaceEmbeddingFeature& f, double total_charge, double total_spin) {
  return f.name == "total_charge" ? total_charge : total_spin;
}

/// The intermediate values of one structure's forward pass, kept for the reverse stage.
template <class S>
struct Forward {
  std::vector<S> concat;                    // [sum of w_f]
  std::vector<std::vector<S>> pre, hidden;  // per continuous feature: W0 v + b0, its silu [w_f]
  std::vector<S> z;                         // [C]: P concat
};

template <class S>
Forward<S> forward(const GraphEmbedding& g, const std::vector<const S*>& w, double total_charge,
                   double total_spin) {
  if (const std::string problem = g.value_problem(total_charge, total_spin); !problem.empty()) {
    throw InputError("compute_graph_embedding: " + problem);
  }
  if (w.size() != g.tensors().size()) {
    throw InputError("compute_graph_embedding: " + std::to_string(w.size()) + " weights given, " +
                     std::to_string(g.tensors().size()) + " expected (GraphEmbedding::tensors())");
  }
  Forward<S> f;
  f.pre.resize(g.features.size());
  f.hidden.resize(g.features.size());
  std::size_t k = 0;  // the next weight
  for (std::size_t i = 0; i < g.features.size(); ++i) {
    const MaceEmbeddingFeature& feat = g.features[i];
    const int n = feat.emb_dim;
    const double v = value_of_feature(feat, total_charge, total_spin);
    if (feat.type == "categorical") {
      const S* row = w[k++] + static_cast<std::ptrdiff_t>(v + feat.offset) * n;
      f.concat.insert(f.concat.end(), row, row + n);
      continue;
    }
    const S* w0 = w[k++];
    const S* b0 = feat.use_bias ? w[k++] : nullptr;
    const S* w2 = w[k++];
    const S* b2 = feat.use_bias ? w[k++] : nullptr;
    std::vector<S>&pre = f.pre[i], &hidden = f.hidden[i];
    for (int j = 0; j < n; ++j) {
      pre.push_back(w0[j] * S(v) + (b0 ? b0[j] : S(0)));
      hidden.push_back(silu(pre[j]));
    }
    for (int j = 0; j < n; ++j) {
      S e = b2 ? b2[j] : S(0);
      for (int m = 0; m < n; ++m) {
        e += w2[static_cast<std::size_t>(j) * n + m] * hidden[m];
      }
      f.concat.push_back(e);
    }
  }
  const S* P = w[k];
  const std::size_t D = f.concat.size();
  f.z.assign(static_cast<std::size_t>(g.channels), S(0));
  for (int c = 0; c < g.channels; ++c) {
    for (std::size_t m = 0; m < D; ++m) {
      f.z[c] += P[c * D + m] * f.concat[m];
    }
  }
  return f;
}

}  // namespace

GraphEmbedding GraphEmbedding::read(const nlohmann::json& embeddings, int channels,
                                    const std::string& source) {
  GraphEmbedding g;
  g.channels = channels;
  try {
    for (const auto& j : embeddings.at("features")) {
      MaceEmbeddingFeature f;
      f.name = j.at("name").get<std::string>();
      f.type = j.at("type").get<std::string>();
      f.emb_dim = j.at("emb_dim").get<int>();
      if (f.type == "categorical") {
        f.num_classes = j.at("num_classes").get<int>();
        f.offset = j.value("offset", 0);
      } else {
        f.use_bias = j.value("use_bias", true);
        if (j.value("in_dim", 1) != 1) {
          throw UnsupportedError(source + ": embeddings feature '" + f.name +
                                 "': in_dim other than 1 (a per-structure value is one number)");
        }
      }
      g.features.push_back(std::move(f));
    }
  } catch (const nlohmann::json::exception& e) {
    throw UnsupportedError(source + ": hyperparameter 'embeddings': " + e.what());
  }
  if (const std::string p = g.problem(); !p.empty()) {
    throw UnsupportedError(source + ": embeddings: " + p);
  }
  return g;
}

nlohmann::json GraphEmbedding::features_json() const {
  nlohmann::json features = nlohmann::json::array();
  for (const auto& f : this->features) {
    nlohmann::json entry = {{"name", f.name}, {"type", f.type}, {"emb_dim", f.emb_dim}};
    if (f.type == "categorical") {
      entry["num_classes"] = f.num_classes;
      entry["offset"] = f.offset;
    } else {
      entry["in_dim"] = 1;
      entry["use_bias"] = f.use_bias;
    }
    features.push_back(entry);
  }
  return features;
}

std::string GraphEmbedding::problem() const {
  std::vector<std::string> seen;
  for (const auto& f : features) {
    if (f.name != "total_charge" && f.name != "total_spin") {
      return "feature '" + f.name + "' is not supported; supported: total_charge, total_spin (per structure)";
    }
    if (std::find(seen.begin(), seen.end(), f.name) != seen.end()) {
      return "feature '" + f.name + "' is given twice";
    }
    seen.push_back(f.name);
    if (f.emb_dim < 1) {
      return f.name + ": emb_dim must be positive";
    }
    if (f.type == "categorical") {
      if (f.num_classes < 1) {
        return f.name + ": a categorical feature needs num_classes >= 1";
      }
    } else if (f.type != "continuous") {
      return f.name + ": type '" + f.type + "' is not supported; supported: categorical, continuous";
    }
  }
  if (channels < 1) {
    return "the node embedding has no channels";
  }
  return "";
}

int GraphEmbedding::width() const {
  int w = 0;
  for (const auto& f : features) {
    w += f.emb_dim;
  }
  return w;
}

std::vector<GraphEmbedding::Tensor> GraphEmbedding::tensors() const {
  std::vector<Tensor> out;
  if (features.empty()) {
    return out;  // a model without the embedding
  }
  for (const auto& f : features) {
    const std::string p = "joint_embedding.embedders." + f.name + ".";
    const std::int64_t n = f.emb_dim;
    if (f.type == "categorical") {
      out.push_back({p + "weight", {f.num_classes, n}, 0});
      continue;
    }
    out.push_back({p + "0.weight", {n, 1}, 1});
    if (f.use_bias) {
      out.push_back({p + "0.bias", {n}, 1});
    }
    out.push_back({p + "2.weight", {n, n}, n});
    if (f.use_bias) {
      out.push_back({p + "2.bias", {n}, n});
    }
  }
  out.push_back({"joint_embedding.project.0.weight", {channels, width()}, width()});
  return out;
}

std::string GraphEmbedding::value_problem(double total_charge, double total_spin) const {
  for (const auto& f : features) {
    const double v = value_of_feature(f, total_charge, total_spin);
    if (!std::isfinite(v)) {
      return f.name + " " + format_value(v) + " is not a finite number";
    }
    // mace-torch takes row (v + offset).long() of the table: only its integers are embedded.
    const double shifted = v + static_cast<double>(f.offset);
    if (f.type == "categorical" &&
        !(shifted == std::trunc(shifted) && shifted >= 0 && shifted < f.num_classes)) {
      return f.name + " " + format_value(v) + " is not one the model embeds: it knows the integers " +
             std::to_string(-f.offset) + " to " + std::to_string(f.num_classes - 1 - f.offset);
    }
  }
  return "";
}

template <class S>
void compute_graph_embedding(const GraphEmbedding& g, const std::vector<const S*>& w, double total_charge,
                             double total_spin, S* s) {
  const Forward<S> f = forward(g, w, total_charge, total_spin);
  for (int c = 0; c < g.channels; ++c) {
    s[c] = silu(f.z[c]);
  }
}

template <class S>
void reverse_graph_embedding(const GraphEmbedding& g, const std::vector<const S*>& w, double total_charge,
                             double total_spin, const S* grad_s, const std::vector<S*>& grad_w) {
  const Forward<S> f = forward(g, w, total_charge, total_spin);
  if (grad_w.size() != w.size()) {
    throw InputError("reverse_graph_embedding: " + std::to_string(grad_w.size()) + " gradients given, " +
                     std::to_string(w.size()) + " expected");
  }
  const std::size_t D = f.concat.size();
  const std::size_t kP = w.size() - 1;
  // Through silu and the projection: dP = gz concat^T, d concat = P^T gz.
  std::vector<S> gconcat(D, S(0));
  for (int c = 0; c < g.channels; ++c) {
    const S gz = grad_s[c] * silu_derivative(f.z[c]);
    for (std::size_t m = 0; m < D; ++m) {
      grad_w[kP][c * D + m] += gz * f.concat[m];
      gconcat[m] += w[kP][c * D + m] * gz;
    }
  }
  std::size_t k = 0, at = 0;  // the next weight; the feature's offset in the concatenation
  for (std::size_t i = 0; i < g.features.size(); ++i) {
    const MaceEmbeddingFeature& feat = g.features[i];
    const int n = feat.emb_dim;
    const S* ge = gconcat.data() + at;
    at += static_cast<std::size_t>(n);
    const double v = value_of_feature(feat, total_charge, total_spin);
    if (feat.type == "categorical") {
      S* row = grad_w[k++] + static_cast<std::ptrdiff_t>(v + feat.offset) * n;
      for (int j = 0; j < n; ++j) {
        row[j] += ge[j];
      }
      continue;
    }
    const std::size_t k0 = k++, kb0 = feat.use_bias ? k++ : 0, k2 = k++, kb2 = feat.use_bias ? k++ : 0;
    const std::vector<S>&pre = f.pre[i], &hidden = f.hidden[i];
    std::vector<S> gpre(static_cast<std::size_t>(n), S(0));
    for (int j = 0; j < n; ++j) {
      if (feat.use_bias) {
        grad_w[kb2][j] += ge[j];
      }
      for (int m = 0; m < n; ++m) {
        grad_w[k2][static_cast<std::size_t>(j) * n + m] += ge[j] * hidden[m];
        gpre[m] += w[k2][static_cast<std::size_t>(j) * n + m] * ge[j];
      }
    }
    for (int m = 0; m < n; ++m) {
      const S gp = gpre[m] * silu_derivative(pre[m]);
      grad_w[k0][m] += gp * S(v);
      if (feat.use_bias) {
        grad_w[kb0][m] += gp;
      }
    }
  }
}

#define FASTMLIP_GRAPH_EMBEDDING(S)                                                                     \
  template void compute_graph_embedding<S>(const GraphEmbedding&, const std::vector<const S*>&, double, \
                                           double, S*);                                                 \
  template void reverse_graph_embedding<S>(const GraphEmbedding&, const std::vector<const S*>&, double, \
                                           double, const S*, const std::vector<S*>&);
FASTMLIP_GRAPH_EMBEDDING(float)
FASTMLIP_GRAPH_EMBEDDING(double)
FASTMLIP_GRAPH_EMBEDDING(Dual<float>)
FASTMLIP_GRAPH_EMBEDDING(Dual<double>)
#undef FASTMLIP_GRAPH_EMBEDDING

}  // namespace fastmlip::models::mace
