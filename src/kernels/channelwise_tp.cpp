// SPDX-License-Identifier: MIT
#include "kernels/channelwise_tp.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>

#include "core/error.hpp"
#include "math/limits.hpp"

namespace fastmlip::kernels {

ChannelwiseTP ChannelwiseTP::mace(const Irreps& irreps1, const Irreps& irreps2, const Irreps& target) {
  for (const auto& e : irreps2) {
    if (e.mul != 1) {
      throw InputError("ChannelwiseTP::mace: edge attributes '" + irreps2.str() +
                       "' must have multiplicity 1 per irrep (spherical harmonics)");
    }
  }
  for (const Irreps* ir : {&irreps1, &irreps2, &target}) {
    for (const auto& e : *ir) {
      if (e.ir.l > kMaxL) {
        throw InputError("ChannelwiseTP::mace: irreps '" + ir->str() + "' contain l = " + std::to_string(e.ir.l) +
                         ", above the supported maximum l = " + std::to_string(kMaxL));
      }
    }
  }
  // Candidate paths in mace-torch's loop order; `k` is the unsorted output index.
  struct Candidate {
    int i1, i2, k;
    MulIrrep out;
  };
  std::vector<Candidate> cand;
  for (std::size_t i1 = 0; i1 < irreps1.size(); ++i1) {
    for (std::size_t i2 = 0; i2 < irreps2.size(); ++i2) {
      for (const Irrep& ir_out : irrep_product(irreps1[i1].ir, irreps2[i2].ir)) {
        if (target.count(ir_out) > 0) {
          cand.push_back({static_cast<int>(i1), static_cast<int>(i2), static_cast<int>(cand.size()),
                          MulIrrep{irreps1[i1].mul, ir_out}});
        }
      }
    }
  }
  // e3nn's Irreps.sort(): a stable sort of the entries by irrep; permut[k] = new position.
  std::vector<int> order(cand.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return cand[a].out.ir < cand[b].out.ir; });
  std::vector<int> permut(cand.size());
  std::vector<MulIrrep> out_entries;
  for (std::size_t pos = 0; pos < order.size(); ++pos) {
    permut[order[pos]] = static_cast<int>(pos);
    out_entries.push_back(cand[order[pos]].out);
  }

  ChannelwiseTP tp;
  tp.irreps1 = irreps1;
  tp.irreps2 = irreps2;
  tp.irreps_out = Irreps(out_entries);
  const auto off1 = irreps1.offsets(), off2 = irreps2.offsets(), off_out = tp.irreps_out.offsets();
  // Instructions sorted by output index (mace-torch sorts them by i_out); each output has
  // exactly one instruction here, so e3nn's 'element' normalisation gives alpha = 2 l3 + 1.
  std::vector<Candidate> sorted = cand;
  std::sort(sorted.begin(), sorted.end(), [&](const Candidate& a, const Candidate& b) { return permut[a.k] < permut[b.k]; });
  const CGTable table = CGTable::build(kMaxL);
  for (const Candidate& c : sorted) {
    TPInstruction ins;
    ins.i1 = c.i1;
    ins.i2 = c.i2;
    ins.out = permut[c.k];
    ins.l1 = irreps1[c.i1].ir.l;
    ins.l2 = irreps2[c.i2].ir.l;
    ins.l3 = c.out.ir.l;
    ins.mul = c.out.mul;
    ins.offset1 = off1[c.i1];
    ins.offset2 = off2[c.i2];
    ins.offset_out = off_out[ins.out];
    ins.offset_weight = tp.weight_numel;
    tp.weight_numel += ins.mul * irreps2[c.i2].mul;
    // Variance sum over the instructions into this output: num_elements("uvu") = mul(i2) = 1.
    int fan = 0;
    for (const Candidate& o : cand) {
      if (permut[o.k] == ins.out) {
        fan += irreps2[o.i2].mul;
      }
    }
    ins.coefficient = std::sqrt(static_cast<double>(2 * ins.l3 + 1) / fan);
    const CGPath& path = table.path(ins.l1, ins.l2, ins.l3);
    ins.cg_begin = static_cast<int>(tp.cg.size());
    for (int n = path.begin; n < path.end; ++n) {
      CGNonZero nz = table.entries[n];
      nz.value *= ins.coefficient;
      tp.cg.push_back(nz);
    }
    ins.cg_end = static_cast<int>(tp.cg.size());
    tp.instructions.push_back(ins);
  }
  return tp;
}

int ChannelwiseTP::out_per_channel() const {
  int n = 0;
  for (const auto& ins : instructions) {
    n += 2 * ins.l3 + 1;
  }
  return n;
}

}  // namespace fastmlip::kernels
