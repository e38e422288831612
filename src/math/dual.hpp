// SPDX-License-Identifier: MIT
#pragma once
/// \file Dual numbers a + b eps (eps^2 = 0): forward-mode derivatives through our own kernels.
///
/// Why: training on forces needs the gradient of a force loss L(F), F = -dE/dr, with respect
/// to the weights theta. With v = dL/dF,
///
///   dL/dtheta = -d/dtheta (v . dE/dr) = -d/d eps [ dE/dtheta (r + eps v) ] at eps = 0,
///
/// because mixed second derivatives commute. So running the ordinary forward and reverse
/// stages with positions r + eps v in dual arithmetic yields, in the eps part of every weight
/// gradient, exactly the force-loss gradient (forward-over-reverse). The same run gives
/// Hessian-vector products in the eps part of the position gradient. Every kernel whose
/// reverse is written for a generic scalar T therefore has its double backward for free, and
/// exactly: dual arithmetic is the chain rule applied to the very operations the kernel runs,
/// with no step size. docs/kernels.md, "Double backward", shows the use.
///
/// Comparisons look at the value only, so a branch (a cutoff, a clamp) is taken as the value
/// takes it, which is the derivative of the branch that was taken, as autograd gives.
#include <cmath>
#include <type_traits>

#include "core/host_device.hpp"

namespace fastmlip {

template <class T>
struct Dual {
  static_assert(std::is_floating_point_v<T>, "Dual: T must be float or double");
  using value_type = T;
  T v;  ///< value
  T d;  ///< tangent: the coefficient of eps

  // Default-initialised like T itself (uninitialised), value-initialised (Dual(), Dual{},
  // std::vector<Dual>(n)) to zero: with member initialisers every kernel's scratch array of
  // duals was zero-filled on each call (a memset of tens of KB per node in the symmetric
  // contraction, 6% of a training step), work the T = float kernels do not do either.
  Dual() = default;
  // Implicit from plain numbers (a constant has zero tangent), so that kernel code written for
  // T = double, with literals such as T(1) or `T acc = 0`, compiles unchanged for Dual.
  template <class U, class = std::enable_if_t<std::is_arithmetic_v<U>>>
  FASTMLIP_HOST_DEVICE constexpr Dual(U value) : v(static_cast<T>(value)), d(0) {}  // NOLINT
  FASTMLIP_HOST_DEVICE constexpr Dual(T value, T tangent) : v(value), d(tangent) {}
  /// Between precisions (Dual<float> results to a Dual<double> host buffer).
  template <class U, class = std::enable_if_t<!std::is_same_v<U, T>>>
  FASTMLIP_HOST_DEVICE constexpr explicit Dual(const Dual<U>& o) : v(static_cast<T>(o.v)), d(static_cast<T>(o.d)) {}

  FASTMLIP_HOST_DEVICE constexpr Dual& operator+=(const Dual& o) {
    v += o.v;
    d += o.d;
    return *this;
  }
  FASTMLIP_HOST_DEVICE constexpr Dual& operator-=(const Dual& o) {
    v -= o.v;
    d -= o.d;
    return *this;
  }
  FASTMLIP_HOST_DEVICE constexpr Dual& operator*=(const Dual& o) {
    d = d * o.v + v * o.d;
    v *= o.v;
    return *this;
  }
  FASTMLIP_HOST_DEVICE constexpr Dual& operator/=(const Dual& o) {
    const T inv = T(1) / o.v;
    v *= inv;
    d = (d - v * o.d) * inv;
    return *this;
  }
  // Kokkos 3.x joins reduction values through volatile references.
  FASTMLIP_HOST_DEVICE void operator+=(const volatile Dual& o) volatile {
    v += o.v;
    d += o.d;
  }
};

template <class T>
struct is_dual : std::false_type {};
template <class T>
struct is_dual<Dual<T>> : std::true_type {};
template <class T>
inline constexpr bool is_dual_v = is_dual<T>::value;

/// The scalars our kernels are written for: float, double, and dual numbers over them.
template <class T>
inline constexpr bool is_kernel_scalar_v = std::is_floating_point_v<T> || is_dual_v<T>;

/// The host type a kernel reports parameter gradients in: double, or Dual<double>.
template <class T>
using host_scalar_t = std::conditional_t<is_dual_v<T>, Dual<double>, double>;

/// Value and tangent parts; a plain number is its own value with zero tangent.
template <class T>
FASTMLIP_HOST_DEVICE constexpr T value_of(T x) {
  return x;
}
template <class T>
FASTMLIP_HOST_DEVICE constexpr T value_of(const Dual<T>& x) {
  return x.v;
}
template <class T>
FASTMLIP_HOST_DEVICE constexpr T tangent_of(T) {
  return T(0);
}
template <class T>
FASTMLIP_HOST_DEVICE constexpr T tangent_of(const Dual<T>& x) {
  return x.d;
}

// Arithmetic. Mixed forms take any plain number, so `2 * x` and `x / n` read as for double.
template <class T>
FASTMLIP_HOST_DEVICE constexpr Dual<T> operator+(const Dual<T>& a) {
  return a;
}
template <class T>
FASTMLIP_HOST_DEVICE constexpr Dual<T> operator-(const Dual<T>& a) {
  return {-a.v, -a.d};
}
template <class T>
FASTMLIP_HOST_DEVICE constexpr Dual<T> operator+(const Dual<T>& a, const Dual<T>& b) {
  return {a.v + b.v, a.d + b.d};
}
template <class T>
FASTMLIP_HOST_DEVICE constexpr Dual<T> operator-(const Dual<T>& a, const Dual<T>& b) {
  return {a.v - b.v, a.d - b.d};
}
template <class T>
FASTMLIP_HOST_DEVICE constexpr Dual<T> operator*(const Dual<T>& a, const Dual<T>& b) {
  return {a.v * b.v, a.d * b.v + a.v * b.d};
}
template <class T>
FASTMLIP_HOST_DEVICE constexpr Dual<T> operator/(const Dual<T>& a, const Dual<T>& b) {
  const T q = a.v / b.v;
  return {q, (a.d - q * b.d) / b.v};
}

#define FASTMLIP_DUAL_MIXED(op)                                                           \
  template <class T, class U, class = std::enable_if_t<std::is_arithmetic_v<U>>>         \
  FASTMLIP_HOST_DEVICE constexpr Dual<T> operator op(const Dual<T>& a, U b) {            \
    return a op Dual<T>(b);                                                               \
  }                                                                                       \
  template <class T, class U, class = std::enable_if_t<std::is_arithmetic_v<U>>>         \
  FASTMLIP_HOST_DEVICE constexpr Dual<T> operator op(U a, const Dual<T>& b) {            \
    return Dual<T>(a) op b;                                                               \
  }
FASTMLIP_DUAL_MIXED(+)
FASTMLIP_DUAL_MIXED(-)
FASTMLIP_DUAL_MIXED(*)
FASTMLIP_DUAL_MIXED(/)
#undef FASTMLIP_DUAL_MIXED

#define FASTMLIP_DUAL_COMPARE(op)                                                         \
  template <class T>                                                                      \
  FASTMLIP_HOST_DEVICE constexpr bool operator op(const Dual<T>& a, const Dual<T>& b) {  \
    return a.v op b.v;                                                                    \
  }                                                                                       \
  template <class T, class U, class = std::enable_if_t<std::is_arithmetic_v<U>>>         \
  FASTMLIP_HOST_DEVICE constexpr bool operator op(const Dual<T>& a, U b) {               \
    return a.v op static_cast<T>(b);                                                      \
  }                                                                                       \
  template <class T, class U, class = std::enable_if_t<std::is_arithmetic_v<U>>>         \
  FASTMLIP_HOST_DEVICE constexpr bool operator op(U a, const Dual<T>& b) {               \
    return static_cast<T>(a) op b.v;                                                      \
  }
FASTMLIP_DUAL_COMPARE(<)
FASTMLIP_DUAL_COMPARE(>)
FASTMLIP_DUAL_COMPARE(<=)
FASTMLIP_DUAL_COMPARE(>=)
FASTMLIP_DUAL_COMPARE(==)
FASTMLIP_DUAL_COMPARE(!=)
#undef FASTMLIP_DUAL_COMPARE

// Elementary functions, found by argument-dependent lookup from code that says
// `using std::sin; sin(x)` or calls fastmlip::kmath::sin.
template <class T>
FASTMLIP_HOST_DEVICE Dual<T> sin(const Dual<T>& a) {
  using std::cos;
  using std::sin;
  return {sin(a.v), a.d * cos(a.v)};
}
template <class T>
FASTMLIP_HOST_DEVICE Dual<T> cos(const Dual<T>& a) {
  using std::cos;
  using std::sin;
  return {cos(a.v), -a.d * sin(a.v)};
}
template <class T>
FASTMLIP_HOST_DEVICE Dual<T> exp(const Dual<T>& a) {
  using std::exp;
  const T e = exp(a.v);
  return {e, a.d * e};
}
template <class T>
FASTMLIP_HOST_DEVICE Dual<T> tanh(const Dual<T>& a) {
  using std::tanh;
  const T t = tanh(a.v);
  return {t, a.d * (T(1) - t * t)};
}
/// d sqrt(a) = d a / (2 sqrt(a)); at a = 0 the tangent is 0 when d a is (a clamped norm never
/// differentiates there), never a NaN from 0/0.
template <class T>
FASTMLIP_HOST_DEVICE Dual<T> sqrt(const Dual<T>& a) {
  using std::sqrt;
  const T s = sqrt(a.v);
  return {s, a.d == T(0) ? T(0) : a.d / (2 * s)};
}
template <class T>
FASTMLIP_HOST_DEVICE Dual<T> abs(const Dual<T>& a) {
  return a.v < 0 ? -a : a;
}
template <class T>
FASTMLIP_HOST_DEVICE Dual<T> fabs(const Dual<T>& a) {
  return a.v < 0 ? -a : a;
}
/// a^p for a plain exponent p: d = p a^(p-1) d a.
template <class T, class U, class = std::enable_if_t<std::is_arithmetic_v<U>>>
FASTMLIP_HOST_DEVICE Dual<T> pow(const Dual<T>& a, U p) {
  using std::pow;
  const T pm1 = pow(a.v, static_cast<T>(p) - T(1));
  return {pm1 * a.v, static_cast<T>(p) * pm1 * a.d};
}

}  // namespace fastmlip
