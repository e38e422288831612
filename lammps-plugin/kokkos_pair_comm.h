// SPDX-License-Identifier: MIT
#pragma once
// The KOKKOS package's pair communication hooks (KokkosBase::pack_forward_comm_kokkos and
// friends), through which CommKokkos packs and unpacks a pair style's per-atom rows on the
// KOKKOS device instead of calling its host pack_forward_comm. Their signatures changed between
// the LAMMPS versions this plugin builds against:
//
//   LAMMPS                forward pack arguments                               reverse hooks
//   29 Sep 2021           (n, send lists [swap][i], swap, buffer, pbc_flag, pbc)  none
//   later releases        (n, this swap's send list, buffer, pbc_flag, pbc)        pack, unpack
//
// and the buffer type was renamed (tdual_xfloat_1d, later tdual_double_1d). Rather than one
// version table per name, KokkosPairComm declares each override with the parameter list it
// reads off KokkosBase's own declaration, so it overrides whatever the headers say; the owner
// (PairFastmlipKokkos) implements the work once, on plain device views. A LAMMPS without the
// reverse hooks gets none (kDeviceReverse is false), and the owner then runs the reverse exchange
// through host rows.
#ifdef LMP_KOKKOS

#include <Kokkos_Core.hpp>
#include <type_traits>

#include "kokkos_base.h"

namespace fastmlip::plugin {

namespace kokkos_comm_detail {

/// Whether Base (KokkosBase) declares the reverse hooks; Base is a parameter so that a LAMMPS
/// without them is a substitution failure, not an error.
template <class Base, class = void>
struct HasReverse : std::false_type {};
template <class Base>
struct HasReverse<
    Base, std::void_t<decltype(&Base::pack_reverse_comm_kokkos), decltype(&Base::unpack_reverse_comm_kokkos)>>
    : std::true_type {};

/// The device views of CommKokkos's arguments, in the owner's device type: a swap's send list
/// (a row of the 2021 table, strided where the table is LayoutLeft, or the later 1-D list) and a
/// buffer's data.
template <class Device>
using SendList = Kokkos::View<const int*, Kokkos::LayoutStride, Device>;

template <class Device, class Buffer>
double* buffer_data(Buffer& buf) {
  auto v = buf.template view<Device>();
  static_assert(std::is_same_v<std::remove_cv_t<typename decltype(v)::value_type>, double>,
                "this LAMMPS's KOKKOS communication buffers do not hold doubles");
  return v.data();
}

/// The forward hooks, with the parameter lists P... and U... of KokkosBase's declarations.
template <class Owner, class Pack, class Unpack>
class Forward;
template <class Owner, class... P, class... U>
class Forward<Owner, int (LAMMPS_NS::KokkosBase::*)(P...), void (LAMMPS_NS::KokkosBase::*)(U...)>
    : public LAMMPS_NS::KokkosBase {
 public:
  int pack_forward_comm_kokkos(P... p) override { return pack_forward(p...); }
  void unpack_forward_comm_kokkos(U... u) override { unpack_forward(u...); }

 private:
  // 29 Sep 2021: every swap's send list, and the swap.
  template <class Lists, class Buffer>
  int pack_forward(int n, Lists& lists, int swap, Buffer& buf, int, int*) {
    using Device = typename Owner::device_type;
    const SendList<Device> list = Kokkos::subview(lists.template view<Device>(), swap, Kokkos::ALL());
    return owner().pack_rows(n, list, buffer_data<Device>(buf));
  }
  // Later: this swap's send list.
  template <class List, class Buffer>
  int pack_forward(int n, List& list, Buffer& buf, int, int*) {
    using Device = typename Owner::device_type;
    return owner().pack_rows(n, SendList<Device>(list.template view<Device>()), buffer_data<Device>(buf));
  }
  template <class Buffer>
  void unpack_forward(int n, int first, Buffer& buf) {
    owner().unpack_rows(n, first, buffer_data<typename Owner::device_type>(buf));
  }
  Owner& owner() { return static_cast<Owner&>(*this); }
};

template <class Owner>
using ForwardOf = Forward<Owner, decltype(&LAMMPS_NS::KokkosBase::pack_forward_comm_kokkos),
                          decltype(&LAMMPS_NS::KokkosBase::unpack_forward_comm_kokkos)>;

/// The reverse hooks, likewise, where KokkosBase has them.
template <class Owner, class Pack, class Unpack>
class Reverse;
template <class Owner, class... P, class... U>
class Reverse<Owner, int (LAMMPS_NS::KokkosBase::*)(P...), void (LAMMPS_NS::KokkosBase::*)(U...)>
    : public ForwardOf<Owner> {
 public:
  int pack_reverse_comm_kokkos(P... p) override { return pack_reverse(p...); }
  void unpack_reverse_comm_kokkos(U... u) override { unpack_reverse(u...); }

 private:
  template <class Buffer>
  int pack_reverse(int n, int first, Buffer& buf) {
    return owner().pack_ghost_rows(n, first, buffer_data<typename Owner::device_type>(buf));
  }
  template <class List, class Buffer>
  void unpack_reverse(int n, List& list, Buffer& buf) {
    using Device = typename Owner::device_type;
    owner().add_rows(n, SendList<Device>(list.template view<Device>()), buffer_data<Device>(buf));
  }
  Owner& owner() { return static_cast<Owner&>(*this); }
};

template <class Owner, class Base = LAMMPS_NS::KokkosBase, bool = HasReverse<Base>::value>
struct Select {
  using type = ForwardOf<Owner>;
};
template <class Owner, class Base>
struct Select<Owner, Base, true> {
  using type =
      Reverse<Owner, decltype(&Base::pack_reverse_comm_kokkos), decltype(&Base::unpack_reverse_comm_kokkos)>;
};

}  // namespace kokkos_comm_detail

/// KokkosBase with the pair communication hooks of this LAMMPS, which hand Owner (CRTP; its
/// `device_type` is the KOKKOS device the views are read on) the device views as these calls,
/// whatever the version:
///   int  pack_rows(n, list, buf)        atoms list(0..n-1)'s values into buf     (forward pack)
///   void unpack_rows(n, first, buf)     buf into atoms first..first+n-1's        (forward unpack)
///   int  pack_ghost_rows(n, first, buf) atoms first..first+n-1's values into buf (reverse pack)
///   void add_rows(n, list, buf)         buf added into atoms list(0..n-1)'s      (reverse unpack)
/// with `list` a SendList<device_type> and `buf` the buffer's double*, the packs returning the
/// number of values; the last two only where kDeviceReverse. The pbc arguments are ignored: the
/// rows are not positions.
template <class Owner>
using KokkosPairComm = typename kokkos_comm_detail::Select<Owner>::type;

/// Whether this LAMMPS's KOKKOS package can call a pair style's reverse hooks.
inline constexpr bool kDeviceReverse = kokkos_comm_detail::HasReverse<LAMMPS_NS::KokkosBase>::value;

}  // namespace fastmlip::plugin

#endif  // LMP_KOKKOS
