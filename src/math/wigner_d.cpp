// SPDX-License-Identifier: MIT
#include "math/wigner_d.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>

#include "core/error.hpp"
#include "math/impl/spherical_harmonics_impl.hpp"
#include "math/limits.hpp"

namespace fastmlip {
namespace {

constexpr double kPi = 3.141592653589793238462643383279502884;

// A product rule on the unit sphere: Gauss-Legendre in cos(theta) with kMaxL + 1 nodes
// (exact to polynomial degree 2 kMaxL + 1) times the trapezoid rule in phi with 2 kMaxL + 1
// points (exact for e^{i k phi}, |k| <= 2 kMaxL). Together exact for every polynomial of
// degree <= 2 kMaxL on the sphere, which Y_i(R v) Y_j(v) is for l <= kMaxL.
struct SphereRule {
  std::vector<std::array<double, 3>> points;
  std::vector<double> weights;  // sum to 4 pi
};

SphereRule make_sphere_rule() {
  constexpr int n = kMaxL + 1;
  constexpr int nphi = 2 * kMaxL + 1;
  SphereRule rule;
  for (int i = 0; i < n; ++i) {
    // Newton's method on P_n from the classic initial guess, which lies in the basin of the
    // i-th root; P_n and P_n' by the three-term recurrence.
    double z = std::cos(kPi * (i + 0.75) / (n + 0.5));
    double dp = 1;
    for (int it = 0; it < 100; ++it) {
      double p0 = 1, p1 = z;
      for (int k = 2; k <= n; ++k) {
        const double p2 = ((2 * k - 1) * z * p1 - (k - 1) * p0) / k;
        p0 = p1;
        p1 = p2;
      }
      dp = n * (z * p1 - p0) / (z * z - 1);
      const double step = p1 / dp;
      z -= step;
      if (std::abs(step) < 1e-16) {
        break;
      }
    }
    const double w_theta = 2 / ((1 - z * z) * dp * dp);
    const double s = std::sqrt(1 - z * z);
    for (int k = 0; k < nphi; ++k) {
      const double phi = 2 * kPi * k / nphi;
      rule.points.push_back({s * std::cos(phi), z, s * std::sin(phi)});
      rule.weights.push_back(w_theta * 2 * kPi / nphi);
    }
  }
  return rule;
}

const SphereRule& sphere_rule() {
  static const SphereRule rule = make_sphere_rule();
  return rule;
}

template <class T>
constexpr double orthogonality_tolerance() {
  return std::is_same_v<T, float> ? 1e-5 : 1e-10;
}

template <class T>
double determinant(const Mat3<T>& R) {
  return double(R[0]) * (double(R[4]) * R[8] - double(R[5]) * R[7]) -
         double(R[1]) * (double(R[3]) * R[8] - double(R[5]) * R[6]) +
         double(R[2]) * (double(R[3]) * R[7] - double(R[4]) * R[6]);
}

// Throws unless R^T R = I within the dtype's tolerance; returns det R (then +-1).
template <class T>
double check_orthogonal(const Mat3<T>& R, const char* where) {
  double worst = 0;
  for (int a = 0; a < 3; ++a) {
    for (int b = 0; b < 3; ++b) {
      double dot = 0;
      for (int k = 0; k < 3; ++k) {
        dot += double(R[3 * k + a]) * R[3 * k + b];
      }
      worst = std::max(worst, std::abs(dot - (a == b ? 1.0 : 0.0)));
    }
  }
  if (!(worst <= orthogonality_tolerance<T>())) {
    throw InputError(std::string(where) + ": the matrix is not orthogonal (max |R^T R - I| = " +
                     std::to_string(worst) + "); pass a rotation matrix");
  }
  return determinant(R);
}

// D^l of a proper rotation given in double, into out (row-major, offset by `stride` rows).
void wigner_D_double(int l, const Mat3<double>& R, double* out, int stride) {
  const SphereRule& rule = sphere_rule();
  const int d = 2 * l + 1;
  const int first = l * l;
  double y[sh_dim(kMaxL)], yr[sh_dim(kMaxL)];
  for (int i = 0; i < d; ++i) {
    for (int j = 0; j < d; ++j) {
      out[i * stride + j] = 0;
    }
  }
  for (std::size_t q = 0; q < rule.points.size(); ++q) {
    const std::array<double, 3>& v = rule.points[q];
    const double rv[3] = {R[0] * v[0] + R[1] * v[1] + R[2] * v[2], R[3] * v[0] + R[4] * v[1] + R[5] * v[2],
                          R[6] * v[0] + R[7] * v[1] + R[8] * v[2]};
    detail::spherical_harmonics_one<double>(l, v[0], v[1], v[2], y, nullptr);
    detail::spherical_harmonics_one<double>(l, rv[0], rv[1], rv[2], yr, nullptr);
    // Component normalisation makes \int Y_i Y_j = 4 pi delta_ij.
    const double w = rule.weights[q] / (4 * kPi);
    for (int i = 0; i < d; ++i) {
      for (int j = 0; j < d; ++j) {
        out[i * stride + j] += w * yr[first + i] * y[first + j];
      }
    }
  }
}

void check_l(int l, const char* where) {
  if (l < 0 || l > kMaxL) {
    throw InputError(std::string(where) + ": l = " + std::to_string(l) +
                     " is outside the supported range 0 <= l <= " + std::to_string(kMaxL));
  }
}

}  // namespace

template <class T>
Mat3<T> rotation_from_euler(T alpha, T beta, T gamma) {
  const T ca = std::cos(alpha), sa = std::sin(alpha);
  const T cb = std::cos(beta), sb = std::sin(beta);
  const T cg = std::cos(gamma), sg = std::sin(gamma);
  // R_y(t) = [[c, 0, s], [0, 1, 0], [-s, 0, c]],  R_x(t) = [[1, 0, 0], [0, c, -s], [0, s, c]]
  const Mat3<T> ry_a = {ca, 0, sa, 0, 1, 0, -sa, 0, ca};
  const Mat3<T> rx_b = {1, 0, 0, 0, cb, -sb, 0, sb, cb};
  const Mat3<T> ry_g = {cg, 0, sg, 0, 1, 0, -sg, 0, cg};
  const auto mul = [](const Mat3<T>& a, const Mat3<T>& b) {
    Mat3<T> c{};
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j) {
        for (int k = 0; k < 3; ++k) {
          c[3 * i + j] += a[3 * i + k] * b[3 * k + j];
        }
      }
    }
    return c;
  };
  return mul(mul(ry_a, rx_b), ry_g);
}

template <class T>
Mat3<T> rotation_from_quaternion(T w, T x, T y, T z) {
  const T n = std::sqrt(w * w + x * x + y * y + z * z);
  if (!(n > 0)) {
    throw InputError("rotation_from_quaternion: the quaternion is zero (or not finite); it has no rotation");
  }
  w /= n;
  x /= n;
  y /= n;
  z /= n;
  return {1 - 2 * (y * y + z * z), 2 * (x * y - w * z),     2 * (x * z + w * y),
          2 * (x * y + w * z),     1 - 2 * (x * x + z * z), 2 * (y * z - w * x),
          2 * (x * z - w * y),     2 * (y * z + w * x),     1 - 2 * (x * x + y * y)};
}

template <class T>
std::vector<T> wigner_D(int l, const Mat3<T>& R) {
  check_l(l, "wigner_D");
  const double det = check_orthogonal(R, "wigner_D");
  if (det < 0) {
    throw InputError(
        "wigner_D: det R = " + std::to_string(det) +
        ": an improper rotation has no D^l of its own; use wigner_D(irreps, R), which applies parity");
  }
  Mat3<double> Rd;
  for (int k = 0; k < 9; ++k) {
    Rd[k] = static_cast<double>(R[k]);
  }
  const int d = 2 * l + 1;
  std::vector<double> D(static_cast<std::size_t>(d * d));
  wigner_D_double(l, Rd, D.data(), d);
  return std::vector<T>(D.begin(), D.end());
}

template <class T>
std::vector<T> wigner_D(int l, T alpha, T beta, T gamma) {
  // Built in double so that float angles lose nothing beyond their own rounding.
  const Mat3<double> R = rotation_from_euler<double>(alpha, beta, gamma);
  check_l(l, "wigner_D");
  const int d = 2 * l + 1;
  std::vector<double> D(static_cast<std::size_t>(d * d));
  wigner_D_double(l, R, D.data(), d);
  return std::vector<T>(D.begin(), D.end());
}

template <class T>
std::vector<T> wigner_D(const Irreps& irreps, const Mat3<T>& R) {
  const double det = check_orthogonal(R, "wigner_D(irreps)");
  const bool improper = det < 0;
  Mat3<double> proper;
  for (int k = 0; k < 9; ++k) {
    proper[k] = improper ? -double(R[k]) : double(R[k]);
  }
  const int n = irreps.dim();
  std::vector<double> D(static_cast<std::size_t>(n) * n, 0.0);
  int offset = 0;
  for (const MulIrrep& e : irreps) {
    check_l(e.ir.l, "wigner_D(irreps)");
    const int d = e.ir.dim();
    const double sign = (improper && e.ir.p == -1) ? -1.0 : 1.0;
    std::vector<double> block(static_cast<std::size_t>(d * d));
    wigner_D_double(e.ir.l, proper, block.data(), d);
    for (int copy = 0; copy < e.mul; ++copy) {
      for (int i = 0; i < d; ++i) {
        for (int j = 0; j < d; ++j) {
          D[static_cast<std::size_t>(offset + i) * n + offset + j] =
              sign * block[static_cast<std::size_t>(i * d + j)];
        }
      }
      offset += d;
    }
  }
  return std::vector<T>(D.begin(), D.end());
}

template Mat3<float> rotation_from_euler<float>(float, float, float);
template Mat3<double> rotation_from_euler<double>(double, double, double);
template Mat3<float> rotation_from_quaternion<float>(float, float, float, float);
template Mat3<double> rotation_from_quaternion<double>(double, double, double, double);
template std::vector<float> wigner_D<float>(int, const Mat3<float>&);
template std::vector<double> wigner_D<double>(int, const Mat3<double>&);
template std::vector<float> wigner_D<float>(int, float, float, float);
template std::vector<double> wigner_D<double>(int, double, double, double);
template std::vector<float> wigner_D<float>(const Irreps&, const Mat3<float>&);
template std::vector<double> wigner_D<double>(const Irreps&, const Mat3<double>&);

}  // namespace fastmlip
