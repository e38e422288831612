// SPDX-License-Identifier: MIT
#include <gtest/gtest.h>

#include <thread>

#include "core/error.hpp"
#include "distributed.hpp"
#include "nccl.hpp"

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

// The overlapped all-reduce gives bitwise the gradients of allreduce_mean_gradients, in the
// shape of a training step: forces by autograd with create_graph (torch::autograd::grad on the
// positions) inside each backward pass, two accumulated passes of which only the second is
// armed, a parameter that only rank 0 uses, one that no rank uses, and 16-byte buckets so that
// there are several. Two steps with one reducer check that it re-arms.
TYPED_TEST(Distributed, OverlappedReduceEqualsBlockingReduceBitwise) {
  const auto dt = dtype_of<TypeParam>();
  auto make_params = [&] {
    torch::manual_seed(11);
    std::vector<torch::Tensor> p;
    for (const auto& shape : std::vector<std::vector<std::int64_t>>{{5}, {2}, {3, 4}, {4}, {4, 1}}) {
      p.push_back(torch::randn(shape, dt).requires_grad_());
    }
    return p;  // unused, rank 0 only, W1, b1, W2
  };
  auto pass = [&](const std::vector<torch::Tensor>& p, int step, int bin) {
    torch::manual_seed(1000 + 100 * rank() + 10 * step + bin);
    auto x = torch::randn({6, 3}, dt).requires_grad_();
    auto e = torch::tanh(x.matmul(p[2]) + p[3]).matmul(p[4]).sum();
    if (rank() == 0) {
      e = e + p[1].pow(2).sum() * x.sum();
    }
    auto f = -torch::autograd::grad(torch::autograd::variable_list{e}, torch::autograd::variable_list{x}, {},
                                    /*retain_graph=*/true, /*create_graph=*/true)[0];
    ((f - 0.3).pow(2).sum() + e * e).backward();
  };
  auto ref = make_params();
  auto ovl = make_params();
  OverlappedGradientReducer reducer(ovl, MPI_COMM_WORLD, /*bucket_bytes=*/16);
  EXPECT_EQ(reducer.num_buckets(), 5u);
  for (int step = 0; step < 2; ++step) {
    for (auto* ps : {&ref, &ovl}) {
      for (auto& t : *ps) {
        t.mutable_grad() = torch::Tensor();
      }
    }
    pass(ref, step, 0);
    pass(ref, step, 1);
    allreduce_mean_gradients(ref, MPI_COMM_WORLD, 16);
    pass(ovl, step, 0);
    reducer.arm();
    pass(ovl, step, 1);
    reducer.finish();
    for (std::size_t i = 0; i < ref.size(); ++i) {
      ASSERT_TRUE(ovl[i].grad().defined()) << "parameter " << i;
      EXPECT_TRUE(torch::equal(ovl[i].grad(), ref[i].grad())) << "step " << step << ", parameter " << i;
    }
    EXPECT_EQ(ovl[0].grad().abs().sum().template item<double>(), 0.0);
    // W2, b1 and W1 are complete before backward ends, so their buckets went out early.
    EXPECT_GE(reducer.started_during_backward(), 3u);
  }
}

// A GPU model's backward runs on LibTorch's device thread while the caller of arm() waits: here
// the armed backward runs on a second thread. MPI initialised SERIALIZED (as train-potential and
// this test main do), the buckets still leave during backward, and the bits are the blocking
// reduce's.
TYPED_TEST(Distributed, OverlapsWhenBackwardRunsOnAnotherThread) {
  int level = MPI_THREAD_SINGLE;
  MPI_Query_thread(&level);
  ASSERT_GE(level, MPI_THREAD_SERIALIZED) << "the test main asks MPI for MPI_THREAD_SERIALIZED";
  const auto dt = dtype_of<TypeParam>();
  auto make_params = [&] {
    torch::manual_seed(12);
    std::vector<torch::Tensor> p;
    for (const auto& shape : std::vector<std::vector<std::int64_t>>{{3, 4}, {4}, {4, 2}}) {
      p.push_back(torch::randn(shape, dt).requires_grad_());
    }
    return p;  // W1, b1, W2
  };
  auto pass = [&](const std::vector<torch::Tensor>& p) {
    torch::manual_seed(2000 + rank());
    auto x = torch::randn({5, 3}, dt);
    torch::tanh(x.matmul(p[0]) + p[1]).matmul(p[2]).pow(2).sum().backward();
  };
  auto ref = make_params();
  auto ovl = make_params();
  OverlappedGradientReducer reducer(ovl, MPI_COMM_WORLD, /*bucket_bytes=*/16);
  pass(ref);
  allreduce_mean_gradients(ref, MPI_COMM_WORLD, 16);
  reducer.arm();
  std::thread backward([&] { pass(ovl); });
  backward.join();
  reducer.finish();
  for (std::size_t i = 0; i < ref.size(); ++i) {
    EXPECT_TRUE(torch::equal(ovl[i].grad(), ref[i].grad())) << "parameter " << i;
  }
  // W2 and b1 are complete before backward reaches W1: their buckets left from the other thread.
  EXPECT_GE(reducer.started_during_backward(), 2u);
}

// NCCL (--allreduce nccl) on the GPUs: the gradients' means are MPI's (the same bits on one rank,
// where the sum is the value itself). One GPU shared by several ranks is refused, naming them: the
// lent GPU machine has one GPU, so its 2-rank run checks that.
TYPED_TEST(Distributed, NcclOnTheGpusGivesMpisMeanGradients) {
  if (!kHaveNccl || !torch::cuda::is_available()) {
    GTEST_SKIP() << (kHaveNccl ? "no GPU visible to LibTorch" : nccl_problem(torch::kCUDA, MPI_COMM_WORLD));
  }
  const auto gpus = static_cast<int>(torch::cuda::device_count());
  const torch::Device gpu(torch::kCUDA, static_cast<torch::DeviceIndex>(rank() % gpus));
  const std::string problem = nccl_problem(gpu, MPI_COMM_WORLD);
  if (world() > gpus) {
    EXPECT_NE(problem.find("share GPU"), std::string::npos) << problem;
    EXPECT_THROW(NcclCommunicator(MPI_COMM_WORLD, gpu), UnsupportedError);
    return;
  }
  ASSERT_EQ(problem, "");
  NcclCommunicator nccl(MPI_COMM_WORLD, gpu);
  const auto dt = dtype_of<TypeParam>();
  std::vector<torch::Tensor> host, device;
  torch::manual_seed(21 + rank());
  for (const auto& shape : std::vector<std::vector<std::int64_t>>{{7}, {3, 5}, {1}, {4, 3}}) {
    host.push_back(torch::zeros(shape, dt).requires_grad_());
    device.push_back(torch::zeros(shape, torch::TensorOptions().dtype(dt).device(gpu)).requires_grad_());
  }
  for (std::size_t i = 0; i + 1 < host.size(); ++i) {  // the last has no gradient on any rank
    host[i].mutable_grad() = torch::randn(host[i].sizes(), dt);
    device[i].mutable_grad() = host[i].grad().to(gpu);
  }
  allreduce_mean_gradients(host, MPI_COMM_WORLD, /*bucket_bytes=*/16);
  allreduce_mean_gradients(device, MPI_COMM_WORLD, /*bucket_bytes=*/16, &nccl);
  for (std::size_t i = 0; i < host.size(); ++i) {
    ASSERT_TRUE(device[i].grad().defined()) << "parameter " << i;
    EXPECT_EQ(device[i].grad().device(), gpu) << "parameter " << i;
    const auto got = device[i].grad().cpu();
    if (world() == 1) {
      EXPECT_TRUE(torch::equal(got, host[i].grad())) << "parameter " << i;
    } else {  // NCCL's ring adds in its own order
      const double tol = std::is_same_v<TypeParam, double> ? 1e-14 : 1e-6;
      EXPECT_TRUE(torch::allclose(got, host[i].grad(), tol, tol)) << "parameter " << i;
    }
  }
}

// Asking NCCL for what it cannot do names the reason, on every build, before any collective of
// NCCL's own.
TEST(DistributedErrors, NcclRefusesACpuModelSayingWhy) {
  const std::string problem = nccl_problem(torch::kCPU, MPI_COMM_WORLD);
  EXPECT_NE(problem.find(kHaveNccl ? "--device cuda" : "built without NCCL"), std::string::npos) << problem;
  EXPECT_THROW(NcclCommunicator(MPI_COMM_WORLD, torch::kCPU), UnsupportedError);
}

TEST(DistributedErrors, RejectsIntegerParametersBeforeAnyCollective) {
  std::vector<torch::Tensor> params = {torch::zeros({2}, torch::kFloat64), torch::zeros({2}, torch::kInt64)};
  EXPECT_THROW(allreduce_mean_gradients(params, MPI_COMM_WORLD), InputError);
  EXPECT_THROW(OverlappedGradientReducer(params, MPI_COMM_WORLD), InputError);
}

}  // namespace
}  // namespace fastmlip::trainer
