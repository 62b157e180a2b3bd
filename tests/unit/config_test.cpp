// c10d/core/Config.hpp: one table, one policy. Every variable the table accepts values for is
// refused, by name, when it holds anything else, at a process group's creation;
// ProcessGroupOptions::config sets a group's variables over the environment and refuses what is not
// a group's to set.

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "c10d/ProcessGroup.hpp"
#include "c10d/core/Config.hpp"
#include "c10d/core/Logging.hpp"
#include "store/HashStore.hpp"

namespace c10d::inline v1 {
namespace {

// Sets one environment variable for its scope.
class ScopedEnv {
 public:
  ScopedEnv(std::string name, const std::string& value) : name_(std::move(name)) {
    ::setenv(name_.c_str(), value.c_str(), 1);
  }
  ~ScopedEnv() { ::unsetenv(name_.c_str()); }

 private:
  std::string name_;
};

std::shared_ptr<ProcessGroup> groupOfOne(ProcessGroupOptions options = {}) {
  return std::make_shared<ProcessGroup>(std::make_shared<HashStore>(), 0, 1, std::move(options));
}

// A value the variable does not accept, or "" for those that take any text.
std::string badValue(const config::Variable& v) {
  switch (v.type) {
    case config::Type::Choice:
      return "no-such-value";
    case config::Type::Integer:
      return std::to_string(v.max) + "0";  // past the range
    default:
      return "";
  }
}

// Throws what fn throws, with its message in a gtest failure when it is not InvalidArgument
// naming every one of needles.
template <typename Fn>
void expectRefused(Fn&& fn, std::initializer_list<std::string> needles, const std::string& what) {
  try {
    fn();
    ADD_FAILURE() << what << ": accepted";
  } catch (const InvalidArgument& e) {
    for (const std::string& needle : needles) {
      EXPECT_NE(std::string(e.what()).find(needle), std::string::npos)
          << what << ": '" << needle << "' missing from: " << e.what();
    }
  }
}

TEST(ConfigTest, EveryCheckedVariableIsRefusedByNameAtGroupCreation) {
  int checked = 0;
  for (const config::Variable& v : config::kVariables) {
    std::string bad = badValue(v);
    if (bad.empty()) continue;
    ScopedEnv env(std::string(v.name), bad);
    expectRefused([] { groupOfOne(); }, {std::string(v.name), bad, config::accepted(v)},
                  std::string(v.name));
    ++checked;
  }
  EXPECT_GE(checked, 10) << "the table lost its checked variables";
}

TEST(ConfigTest, TheTableNamesEachVariableOnceWithAMeaningAndADefault) {
  for (size_t i = 0; i < std::size(config::kVariables); ++i) {
    const config::Variable& v = config::kVariables[i];
    EXPECT_EQ(v.name.rfind("C10D_", 0), 0u) << v.name;
    EXPECT_FALSE(v.meaning.empty()) << v.name;
    for (size_t j = 0; j < i; ++j) EXPECT_NE(v.name, config::kVariables[j].name);
    // Every default is itself accepted: the table cannot contradict itself.
    if (!v.fallback.empty()) {
      EXPECT_NO_THROW(config::check(v, v.fallback, "default")) << v.name;
    }
    if (v.type == config::Type::Integer) {
      EXPECT_FALSE(v.fallback.empty()) << v.name;
    }
  }
}

TEST(ConfigTest, UnsetAndEmptyMeanTheDefault) {
  const config::Settings settings;
  EXPECT_EQ(settings.integer("C10D_FLIGHT_RECORDER_SIZE"), 1000);
  ScopedEnv empty("C10D_FLIGHT_RECORDER_SIZE", "");
  EXPECT_EQ(settings.integer("C10D_FLIGHT_RECORDER_SIZE"), 1000);
  EXPECT_EQ(settings.flag("C10D_GLOO_BUSY_POLL"), std::nullopt);  // no default: the backend decides
  EXPECT_EQ(settings.flag("C10D_MPI_ABORT_ON_TIMEOUT"), true);
}

TEST(ConfigTest, AFlagIsZeroOrOneAndNothingElse) {
  // It used to be: anything but "1" was off, so "true" and "yes" turned busy polling off.
  ScopedEnv env("C10D_GLOO_BUSY_POLL", "true");
  expectRefused([] { config::Settings().flag("C10D_GLOO_BUSY_POLL"); },
                {"C10D_GLOO_BUSY_POLL='true' (environment)", "expected `0` or `1`"}, "true");
}

TEST(ConfigTest, GroupOptionsOverTheEnvironment) {
  ScopedEnv env("C10D_DEBUG", "LOUD");
  // The environment's bad value is not this group's concern when the group sets its own.
  auto group = groupOfOne({.config = {{"C10D_DEBUG", "OFF"}}});
  Tensor t = Tensor::zeros({4}, ScalarType::Float32);
  group->allreduce(t)->wait();
  // An empty value in the options means the default, not the environment's value.
  EXPECT_EQ(
      config::Settings(std::map<std::string, std::string>{{"C10D_DEBUG", ""}}).value("C10D_DEBUG"),
      "OFF");
  expectRefused([] { groupOfOne(); }, {"C10D_DEBUG='LOUD' (environment)"}, "env");
}

TEST(ConfigTest, GroupOptionsRefuseUnknownProcessWideAndBadValues) {
  expectRefused(
      [] {
        groupOfOne({.config = {{"C10D_DEGUB", "INFO"}}});
      },
      {"'C10D_DEGUB'", "not a c10d variable"}, "unknown");
  expectRefused(
      [] {
        groupOfOne({.config = {{"C10D_LOG_LEVEL", "INFO"}}});
      },
      {"C10D_LOG_LEVEL", "set it in the environment"}, "process-wide");
  expectRefused(
      [] {
        groupOfOne({.config = {{"C10D_GLOO_FAST_PATH", "sometimes"}}});
      },
      {"C10D_GLOO_FAST_PATH='sometimes' (ProcessGroupOptions::config)", "`0`, `all` or `size`"},
      "bad value");
}

TEST(ConfigTest, AGroupsSettingReachesItsBackend) {
  // The Gloo backend binds the interface the group's settings name: one that does not exist is
  // its error, not the environment's.
  try {
    groupOfOne({.backend = "gloo", .config = {{"C10D_SOCKET_IFNAME", "c10dnosuch0"}}});
    ADD_FAILURE() << "a group on a missing interface was created";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("c10dnosuch0"), std::string::npos) << e.what();
  }
}

TEST(ConfigTest, TheAliasIsReadWhenTheNameIsUnset) {
  ScopedEnv alias("GLOO_SOCKET_IFNAME", "lo");
  const config::Settings settings;
  EXPECT_EQ(settings.value("C10D_SOCKET_IFNAME"), "lo");
  EXPECT_EQ(settings.origin("C10D_SOCKET_IFNAME"), "from GLOO_SOCKET_IFNAME");
  ScopedEnv own("C10D_SOCKET_IFNAME", "eth9");
  EXPECT_EQ(settings.value("C10D_SOCKET_IFNAME"), "eth9");
}

TEST(ConfigTest, ASecretIsNeverPrinted) {
  config::Variable token = config::variable("C10D_AUTH_TOKEN");
  token.type = config::Type::Choice;  // a checked copy, to make the check fail
  token.choices = "x";
  expectRefused([&] { config::check(token, "hunter2", "environment"); }, {"<secret>"}, "secret");
  try {
    config::check(token, "hunter2", "environment");
  } catch (const InvalidArgument& e) {
    EXPECT_EQ(std::string(e.what()).find("hunter2"), std::string::npos) << e.what();
  }
}

TEST(ConfigTest, AMisspeltVariableIsNamed) {
  ScopedEnv typo("C10D_DEGUB", "DETAIL");
  auto unknown = config::unknownEnvironmentNames();
  EXPECT_NE(std::find(unknown.begin(), unknown.end(), "C10D_DEGUB"), unknown.end());
  EXPECT_EQ(std::find(unknown.begin(), unknown.end(), "C10D_DEBUG"), unknown.end());
}

TEST(ConfigTest, TheLocalRankComesFromTheLauncherOrTheOptions) {
  {
    ScopedEnv local("LOCAL_RANK", "3");
    EXPECT_EQ(groupOfOne()->localRank(), 3);
    EXPECT_EQ(groupOfOne({.localRank = 1})->localRank(), 1);
  }
  {
    ScopedEnv local("OMPI_COMM_WORLD_LOCAL_RANK", "2");
    EXPECT_EQ(groupOfOne()->localRank(), 2);
  }
  {
    ScopedEnv local("LOCAL_RANK", "first");
    expectRefused([] { groupOfOne(); }, {"LOCAL_RANK='first'"}, "bad local rank");
  }
  EXPECT_EQ(groupOfOne()->localRank(), -1);
}

}  // namespace
}  // namespace c10d::inline v1
