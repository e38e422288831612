// SPDX-License-Identifier: MIT
#include "models/mace/mace_stages.hpp"

#include <algorithm>
#include <utility>

#include "models/mace/mace_spec.hpp"

namespace fastmlip::models::mace {

namespace {

bool is_node_stage(StageKind k) {
  return k != StageKind::EdgeBasis && k != StageKind::Zbl && k != StageKind::NodeEnergy;
}

}  // namespace

bool reads_slot(StageKind k) { return is_node_stage(k) && k != StageKind::Embedding; }
bool writes_slot(StageKind k) { return is_node_stage(k) && k != StageKind::Readout; }

std::vector<Stage> stage_list(const MaceSpec& spec) {
  const auto node = [](StageKind kind, int t, Slot in, Slot out) {
    Stage s;
    s.kind = kind;
    s.layer = t;
    s.in = in;
    s.out = out;
    return s;
  };
  const auto model_wide = [](StageKind kind) {
    Stage s;
    s.kind = kind;
    return s;
  };
  std::vector<Stage> list;
  list.push_back(model_wide(StageKind::EdgeBasis));
  list.push_back(node(StageKind::Embedding, -1, {}, {Value::Features, 0}));
  if (spec.zbl) {
    list.push_back(model_wide(StageKind::Zbl));
  }
  for (int t = 0; t < spec.num_interactions; ++t) {
    const InteractionSpec& I = spec.interactions.at(t);
    const ProductSpec& P = spec.products.at(t);
    const Slot x{Value::Features, t}, h{Value::Senders, t}, A{Value::Messages, t}, m{Value::ProductInput, t};
    const Slot next{Value::Features, t + 1};
    list.push_back(node(StageKind::LinearUp, t, x, h));
    if (t > 0) {
      // Layer 0's senders depend on the species only, which every rank has for its ghosts.
      list.push_back(node(StageKind::ExchangeSenders, t, h, h));
    }
    list.push_back(node(StageKind::Convolution, t, h, A));
    const bool self_connection = I.residual && P.use_sc;
    if (I.nonlinear) {
      const Slot l{Value::LinearOut, t}, u{Value::GateInput, t}, g{Value::GateOutput, t};
      list.push_back(node(StageKind::InteractionLinear, t, A, l));
      list.push_back(node(StageKind::LinearResidual, t, h, u));
      list.push_back(node(StageKind::AddResidual, t, l, u));
      list.push_back(node(StageKind::Gate, t, u, g));
      list.push_back(node(StageKind::LinearOut, t, g, m));
      if (self_connection) {
        list.push_back(node(StageKind::SkipTP, t, x, {Value::SelfConnection, t}));
      }
    } else if (I.residual) {
      // RealAgnosticResidualInteractionBlock: skip_tp of the block's input, added after the product.
      list.push_back(node(StageKind::InteractionLinear, t, A, m));
      if (self_connection) {
        list.push_back(node(StageKind::SkipTP, t, x, {Value::SelfConnection, t}));
      }
    } else {
      // RealAgnosticInteractionBlock: skip_tp of the message, before the product.
      const Slot l{Value::LinearOut, t};
      list.push_back(node(StageKind::InteractionLinear, t, A, l));
      list.push_back(node(StageKind::SkipTP, t, l, m));
    }
    list.push_back(node(StageKind::Product, t, m, next));
    if (self_connection) {
      list.push_back(node(StageKind::AddResidual, t, {Value::SelfConnection, t}, next));
    }
    if (spec.readouts.at(t).present) {  // use_last_readout_only: the last layer's alone
      list.push_back(node(StageKind::Readout, t, next, {}));
    }
  }
  list.push_back(model_wide(StageKind::NodeEnergy));
  return list;
}

StageGraph::StageGraph(std::vector<Stage> list) : stages(std::move(list)) {
  for (const Stage& s : stages) {
    if (!reads_slot(s.kind) || s.kind == StageKind::ExchangeSenders) {
      continue;
    }
    auto it =
        std::find_if(m_consumers.begin(), m_consumers.end(), [&](const auto& c) { return c.first == s.in; });
    if (it == m_consumers.end()) {
      m_consumers.emplace_back(s.in, 1);
    } else {
      ++it->second;
    }
  }
  // What the species alone determine: x^0, and what is computed from such values alone.
  const auto species_only = [this](const Slot& slot) {
    return std::find(m_species_only.begin(), m_species_only.end(), slot) != m_species_only.end();
  };
  for (const Stage& s : stages) {
    if (s.kind == StageKind::Embedding) {
      m_species_only.push_back(s.out);
    } else if (writes_slot(s.kind) && s.kind != StageKind::Convolution && s.kind != StageKind::AddResidual &&
               species_only(s.in) && !species_only(s.out)) {
      m_species_only.push_back(s.out);
    } else if (s.kind == StageKind::AddResidual && !species_only(s.in)) {
      // out += in: out now depends on what in depends on.
      m_species_only.erase(std::remove(m_species_only.begin(), m_species_only.end(), s.out),
                           m_species_only.end());
    }
  }
}

int StageGraph::consumers(const Slot& slot) const {
  for (const auto& c : m_consumers) {
    if (c.first == slot) {
      return c.second;
    }
  }
  return 0;
}

bool StageGraph::needs_adjoint(const Slot& slot) const {
  return std::find(m_species_only.begin(), m_species_only.end(), slot) == m_species_only.end();
}

int StageGraph::max_exchange_width(const MaceSpec& spec) const {
  int w = 0;
  for (const Stage& s : stages) {
    if (s.kind == StageKind::ExchangeSenders) {
      w = std::max(w, spec.interactions.at(s.layer).edge.dim());
    }
  }
  return w;
}

int slot_width(const MaceSpec& spec, const Slot& s) {
  const int T = spec.num_interactions;
  switch (s.value) {
    case Value::Features:
      return s.layer < T ? spec.interactions.at(s.layer).node_feats.dim()
                         : spec.interactions.at(T - 1).hidden.dim();
    case Value::Senders:  // linear_up's output
      return spec.interactions.at(s.layer).edge.dim();
    case Value::Messages:
      return spec.interactions.at(s.layer).tp.dim_out();
    case Value::LinearOut:
    case Value::GateInput: {
      const InteractionSpec& I = spec.interactions.at(s.layer);
      return I.nonlinear ? I.nonlinear->nonlin.dim() : I.target.dim();
    }
    case Value::ProductInput:
    case Value::GateOutput:
      return spec.interactions.at(s.layer).target.dim();
    case Value::SelfConnection:
      return spec.interactions.at(s.layer).hidden.dim();
  }
  return 0;
}

namespace {

std::string slot_name(const Slot& s) {
  const std::string t = std::to_string(s.layer);
  switch (s.value) {
    case Value::Features:
      return "x" + t;
    case Value::Senders:
      return "h" + t;
    case Value::Messages:
      return "A" + t;
    case Value::LinearOut:
      return "l" + t;
    case Value::SelfConnection:
      return "s" + t;
    case Value::ProductInput:
      return "m" + t;
    case Value::GateInput:
      return "u" + t;
    case Value::GateOutput:
      return "g" + t;
  }
  return "?";
}

}  // namespace

std::string describe(const Stage& s) {
  const std::string in = slot_name(s.in), out = slot_name(s.out);
  switch (s.kind) {
    case StageKind::EdgeBasis:
      return "edge basis: Y, B";
    case StageKind::Embedding:
      return "embedding -> " + out;
    case StageKind::Zbl:
      return "zbl -> pair energy";
    case StageKind::LinearUp:
      return "linear_up(" + in + ") -> " + out;
    case StageKind::ExchangeSenders:
      return "exchange " + in;
    case StageKind::Convolution:
      return "conv_tp(" + in + ", Y, B) -> " + out;
    case StageKind::InteractionLinear:
      return "linear(" + in + ") -> " + out;
    case StageKind::SkipTP:
      return "skip_tp(" + in + ") -> " + out;
    case StageKind::LinearResidual:
      return "linear_res(" + in + ") -> " + out;
    case StageKind::Gate:
      return "gate(" + in + ") -> " + out;
    case StageKind::LinearOut:
      return "linear_2(" + in + ") -> " + out;
    case StageKind::Product:
      return "product(" + in + ") -> " + out;
    case StageKind::AddResidual:
      return out + " += " + in;
    case StageKind::Readout:
      return "readout(" + in + ") -> energy";
    case StageKind::NodeEnergy:
      return "node energy";
  }
  return "?";
}

}  // namespace fastmlip::models::mace
