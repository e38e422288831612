// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include "core/error.hpp"
#include "distributed.hpp"

namespace fastmlip::trainer {
namespace {

int rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int world() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}

template <typename T>
class Distributed : public ::testing::Test {};
using Dtypes = ::testing::Types<float, double>;
TYPED_TEST_SUITE(Distributed, Dtypes);

template <typename T>
torch::Dtype dtype_of() {
  return std::is_same_v<T, double> ? torch::kFloat64 : torch::kFloat32;
}

TYPED_TEST(Distributed, BroadcastMakesReplicasIdentical) {
  torch::manual_seed(100 + rank());  // deliberately different initialisation per rank
  std::vector<torch::Tensor> params = {torch::randn({13, 3}, dtype_of<TypeParam>()), torch::randn({1}, dtype_of<TypeParam>())};
  broadcast_parameters(params, MPI_COMM_WORLD);
  torch::manual_seed(100);  // rank 0's values
  auto w0 = torch::randn({13, 3}, dtype_of<TypeParam>());
  auto b0 = torch::randn({1}, dtype_of<TypeParam>());
  EXPECT_TRUE(torch::equal(params[0], w0));
  EXPECT_TRUE(torch::equal(params[1], b0));
}

// The data-parallel mean of per-rank gradients must equal the gradient of the mean loss
// over the union of all ranks' data (equal shard sizes), computed on one process.
TYPED_TEST(Distributed, AveragedGradientEqualsFullBatchGradient) {
  const auto dt = dtype_of<TypeParam>();
  const int n = world();
  const int per_rank = 13;
  torch::manual_seed(7);
  auto x_all = torch::randn({n * per_rank, 5}, dt);
  auto y_all = torch::randn({n * per_rank, 1}, dt);
  auto make_params = [&] {
    torch::manual_seed(11);
    return std::vector<torch::Tensor>{torch::randn({5, 1}, dt).requires_grad_(), torch::randn({1}, dt).requires_grad_(),
                                      torch::randn({3}, dt).requires_grad_()};  // the last gets no gradient
  };
  auto loss_on = [](const std::vector<torch::Tensor>& p, const torch::Tensor& x, const torch::Tensor& y) {
    return (torch::tanh(x.matmul(p[0]) + p[1]) - y).pow(2).mean();
  };

  auto local = make_params();
  loss_on(local, x_all.narrow(0, rank() * per_rank, per_rank), y_all.narrow(0, rank() * per_rank, per_rank)).backward();
  // A bucket smaller than one tensor forces several allreduce calls.
  allreduce_mean_gradients(local, MPI_COMM_WORLD, /*bucket_bytes=*/8);

  auto full = make_params();
  loss_on(full, x_all, y_all).backward();
  const double tol = std::is_same_v<TypeParam, double> ? 1e-13 : 1e-5;
  for (int i = 0; i < 2; ++i) {
    EXPECT_TRUE(torch::allclose(local[i].grad(), full[i].grad(), tol, tol)) << "parameter " << i;
  }
  ASSERT_TRUE(local[2].grad().defined());
  EXPECT_EQ(local[2].grad().abs().sum().template item<double>(), 0.0);
}

TEST(DistributedErrors, RejectsIntegerParametersBeforeAnyCollective) {
  std::vector<torch::Tensor> params = {torch::zeros({2}, torch::kFloat64), torch::zeros({2}, torch::kInt64)};
  EXPECT_THROW(allreduce_mean_gradients(params, MPI_COMM_WORLD), InputError);
}

}  // namespace
}  // namespace fastmlip::trainer
