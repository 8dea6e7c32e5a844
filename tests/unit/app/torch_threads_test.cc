// The automatic Torch thread count and the cgroup quota it respects.
#include "server/app/torch_threads.h"

#include <ATen/Parallel.h>
#include <gtest/gtest.h>

namespace gatescope {
namespace {

TEST(TorchThreads, AnExplicitCountIsKept) {
  EXPECT_EQ(ChooseTorchThreads(3, 2, 4).threads, 3);
}

TEST(TorchThreads, AutomaticLeavesACoreForGrpcAndSharesTheRestAmongInstances) {
  EXPECT_EQ(ChooseTorchThreads(0, 1, 1).threads, 1);   // one core: nothing to leave
  EXPECT_EQ(ChooseTorchThreads(0, 2, 1).threads, 1);   // the measured 2-core case
  EXPECT_EQ(ChooseTorchThreads(0, 2, 2).threads, 1);
  EXPECT_EQ(ChooseTorchThreads(0, 8, 1).threads, 7);
  EXPECT_EQ(ChooseTorchThreads(0, 8, 2).threads, 3);
  EXPECT_EQ(ChooseTorchThreads(0, 16, 4).threads, 3);
  EXPECT_EQ(ChooseTorchThreads(0, 4, 8).threads, 1);   // more instances than cores
  EXPECT_NE(ChooseTorchThreads(0, 8, 2).reason.find("8 usable core"), std::string::npos);
}

TEST(TorchThreads, ForwardCpusOfTheirOwnLeaveNoCoreAside) {
  // --forward_cpus gave the forwards these cores and gRPC others: all of them are shared out.
  EXPECT_EQ(ChooseTorchThreads(0, 1, 1, /*request_cores_apart=*/true).threads, 1);
  EXPECT_EQ(ChooseTorchThreads(0, 4, 1, true).threads, 4);
  EXPECT_EQ(ChooseTorchThreads(0, 6, 2, true).threads, 3);
  EXPECT_EQ(ChooseTorchThreads(0, 2, 4, true).threads, 1);
  EXPECT_EQ(ChooseTorchThreads(5, 4, 1, true).threads, 5);  // explicit still wins
  const std::string reason = ChooseTorchThreads(0, 4, 1, true).reason;
  EXPECT_NE(reason.find("4 core(s) of --forward_cpus"), std::string::npos) << reason;
  EXPECT_EQ(reason.find("left for gRPC"), std::string::npos) << reason;
  EXPECT_GE(WithinCpuQuota(1), 1);
  EXPECT_LE(WithinCpuQuota(3), 3);
}

TEST(TorchThreads, CgroupQuotaInWholeCores) {
  EXPECT_EQ(CgroupCpuQuotaCores("max 100000\n"), std::nullopt);
  EXPECT_EQ(CgroupCpuQuotaCores("200000 100000\n"), 2);
  EXPECT_EQ(CgroupCpuQuotaCores("150000 100000"), 2);  // 1.5 cores: rounded up
  EXPECT_EQ(CgroupCpuQuotaCores("50000 100000"), 1);
  EXPECT_EQ(CgroupCpuQuotaCores(""), std::nullopt);
  EXPECT_EQ(CgroupCpuQuotaCores("garbage"), std::nullopt);
  EXPECT_EQ(CgroupCpuQuotaCores("-1 100000"), std::nullopt);
}

TEST(TorchThreads, UsableCoresIsPositiveAndAppliedCountsStick) {
  EXPECT_GE(UsableCores(), 1);
  ApplyTorchThreads(1);
  EXPECT_EQ(at::get_num_threads(), 1);
}

}  // namespace
}  // namespace gatescope
