#pragma once

// A GoogleTest fixture for suites that run every case on 1 to 4 forked ranks of a backend
// (MultiProcess.hpp), one instantiation per backend. The mpi instantiation's cases skip unless
// the test process itself runs under mpirun with that world size (a ctest per size does that).

#include <gtest/gtest.h>

#include <functional>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "c10d/Backend.hpp"
#include "tests/support/MultiProcess.hpp"

namespace c10d::inline v1::test {

struct BackendRanks {
  std::string backend;
  int worldSize;
};

inline void PrintTo(const BackendRanks& param, std::ostream* out) {
  *out << param.backend << " on " << param.worldSize << " rank(s)";
}

// The instantiation's values: backend on 1, 2, 3 and 4 ranks, named W1 to W4.
inline std::vector<BackendRanks> worldSizes(const std::string& backend) {
  std::vector<BackendRanks> params;
  for (int size : {1, 2, 3, 4}) params.push_back({backend, size});
  return params;
}

inline std::string worldSizeName(const ::testing::TestParamInfo<BackendRanks>& info) {
  return "W" + std::to_string(info.param.worldSize);
}

class RanksOnBackend : public ::testing::TestWithParam<BackendRanks> {
 protected:
  // mpiTest: the ctest that runs the mpi cases under mpirun, less its size ("ddp_mpi_W").
  explicit RanksOnBackend(std::string mpiTest) : mpiTest_(std::move(mpiTest)) {}

  void SetUp() override {
    if (!isBackendRegistered(GetParam().backend)) {
      GTEST_SKIP() << "backend " << GetParam().backend << " is not part of this build";
    }
    if (GetParam().backend == "mpi" && mpirunWorldSize() != GetParam().worldSize) {
      GTEST_SKIP() << "the mpi cases of world size " << GetParam().worldSize
                   << " run under mpirun -np " << GetParam().worldSize << " (ctest: " << mpiTest_
                   << GetParam().worldSize << ")";
    }
  }

  int worldSize() const { return GetParam().worldSize; }

  // Runs body on every rank; passes when every rank exits 0.
  void runOnRanks(const std::function<void(RankEnv&)>& body) {
    auto outcomes =
        runRanks({.backend = GetParam().backend, .worldSize = GetParam().worldSize}, body);
    EXPECT_EQ(exitCodes(outcomes), std::vector<int>(GetParam().worldSize, 0))
        << "backend " << GetParam().backend << ", world size " << GetParam().worldSize << "\n"
        << report(outcomes);
  }

 private:
  std::string mpiTest_;
};

}  // namespace c10d::inline v1::test
