// The cores a rank may use (c10d/core/Cores.hpp): the affinity mask and the cgroup CPU quota,
// read from fake cgroup trees of every layout (v2, v1 with joined controllers, hybrid), and from
// this machine's own affinity mask and, where a test may make one, a real cgroup.

#include <gtest/gtest.h>
#include <sched.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "c10d/core/Cores.hpp"

namespace c10d::inline v1::detail {
namespace {

namespace fs = std::filesystem;

class FakeCgroups : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = fs::temp_directory_path() / ("c10d-cores-" + std::to_string(::getpid()));
    fs::remove_all(root_);
    fs::create_directories(root_);
  }
  void TearDown() override { fs::remove_all(root_); }
  void write(const std::string& relative, const std::string& text) {
    fs::create_directories((root_ / relative).parent_path());
    std::ofstream(root_ / relative) << text << "\n";
  }
  CoreCount count(const std::string& procSelfCgroup, unsigned affinity) {
    return countCores(procSelfCgroup, root_.string(), affinity);
  }
  fs::path root_;
};

TEST_F(FakeCgroups, V2QuotaOnAnAncestorAppliesAndIsRoundedDown) {
  write("job/cpu.max", "150000 100000");
  write("job/step/cpu.max", "max 100000");
  CoreCount cores = count("0::/job/step\n", 8);
  EXPECT_DOUBLE_EQ(cores.quota, 1.5);
  EXPECT_EQ(cores.usable, 1u);
  EXPECT_EQ(cores.affinity, 8u);
  EXPECT_NE(cores.why.find("cpu.max of /job"), std::string::npos) << cores.why;
}

TEST_F(FakeCgroups, TheTightestQuotaOnThePathWins) {
  write("cpu.max", "400000 100000");
  write("a/cpu.max", "300000 100000");
  write("a/b/cpu.max", "600000 100000");
  EXPECT_EQ(count("0::/a/b\n", 64).usable, 3u);
}

TEST_F(FakeCgroups, V1JoinedControllersAndOtherHierarchies) {
  write("cpu,cpuacct/slurm/job1/cpu.cfs_quota_us", "200000");
  write("cpu,cpuacct/slurm/job1/cpu.cfs_period_us", "100000");
  // A quota in another controller's hierarchy is not a CPU quota.
  write("memory/x/cpu.cfs_quota_us", "100000");
  write("memory/x/cpu.cfs_period_us", "100000");
  CoreCount cores = count("5:memory:/x\n3:cpu,cpuacct:/slurm/job1\n1:name=systemd:/\n", 16);
  EXPECT_DOUBLE_EQ(cores.quota, 2.0);
  EXPECT_EQ(cores.usable, 2u);
  EXPECT_NE(cores.why.find("cpu.cfs_quota_us of /slurm/job1"), std::string::npos) << cores.why;
}

TEST_F(FakeCgroups, V1UnlimitedQuotaAndV1UnderCpuAlone) {
  write("cpu/cpu.cfs_quota_us", "-1");
  write("cpu/cpu.cfs_period_us", "100000");
  CoreCount cores = count("2:cpu:/\n", 4);
  EXPECT_EQ(cores.quota, 0);
  EXPECT_EQ(cores.usable, 4u);
  EXPECT_EQ(cores.why, "4 CPUs in the affinity mask");
  write("cpu/k8s/pod/cpu.cfs_quota_us", "250000");
  write("cpu/k8s/pod/cpu.cfs_period_us", "100000");
  EXPECT_EQ(count("2:cpu:/k8s/pod\n", 4).usable, 2u);
}

TEST_F(FakeCgroups, HybridLayoutReadsTheUnifiedMount) {
  write("unified/a/cpu.max", "300000 100000");
  EXPECT_EQ(count("0::/a\n", 32).usable, 3u);
}

TEST_F(FakeCgroups, TheAffinityMaskCanBeTighterThanTheQuota) {
  write("cpu.max", "400000 100000");
  EXPECT_EQ(count("0::/\n", 1).usable, 1u);
}

TEST_F(FakeCgroups, AFractionOfACpuStillCountsOneAndUnreadableFilesCountNothing) {
  write("half/cpu.max", "50000 100000");
  EXPECT_EQ(count("0::/half\n", 8).usable, 1u);
  write("junk/cpu.max", "lots 100000");
  write("zero/cpu.max", "100000 0");
  EXPECT_EQ(count("0::/junk\n", 8).usable, 8u);
  EXPECT_EQ(count("0::/zero\n", 8).usable, 8u);
  EXPECT_EQ(count("0::/absent\n", 8).usable, 8u);
  EXPECT_EQ(count("garbage without colons\n\n", 8).usable, 8u);
  CoreCount unknown = count("", 0);
  EXPECT_EQ(unknown.usable, 1u);
  EXPECT_EQ(unknown.why, "affinity mask unreadable");
}

// Runs body in a child process (usableCores() is read once per process); fails with its code.
template <typename Body>
void inChild(Body body) {
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(body());
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "child status " << status;
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the child saw the wrong count (its exit code says which)";
}

TEST(Cores, AProcessPinnedToOneCpuCountsOne) {
  inChild([] {
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(0, &one);
    if (sched_setaffinity(0, sizeof one, &one) != 0) return 2;
    const CoreCount& cores = usableCores();
    if (cores.affinity != 1) return 3;
    return cores.usable == 1 ? 0 : 4;
  });
}

// A real cgroup v1 CPU quota of one CPU, where this machine lets a test make one (root, a
// writable cpu hierarchy): the child moves itself in and counts 1 whatever the host has.
TEST(Cores, AProcessInACgroupWithAOneCpuQuotaCountsOne) {
  const fs::path hierarchy = "/sys/fs/cgroup/cpu";
  const fs::path mine = hierarchy / ("c10d-cores-test-" + std::to_string(::getpid()));
  std::error_code error;
  if (::geteuid() != 0 || !fs::exists(hierarchy / "cpu.cfs_quota_us") ||
      !fs::create_directory(mine, error)) {
    GTEST_SKIP() << "cannot make a cgroup v1 cpu group here (needs root and a writable "
                 << hierarchy << "); the fake trees above test the reader";
  }
  {
    std::ofstream(mine / "cpu.cfs_period_us") << "100000\n";
    std::ofstream(mine / "cpu.cfs_quota_us") << "100000\n";
  }
  inChild([&] {
    std::ofstream(mine / "cgroup.procs") << ::getpid() << "\n";
    const CoreCount& cores = usableCores();
    if (cores.quota != 1.0) return 5;
    return cores.usable == 1 ? 0 : 6;
  });
  fs::remove(mine, error);  // the child has ended: the group is empty
  EXPECT_FALSE(error) << "could not remove " << mine << ": " << error.message();
}

}  // namespace
}  // namespace c10d::inline v1::detail
