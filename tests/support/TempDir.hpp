#pragma once

// A folder of the test's own under /tmp, removed with everything in it when the test ends.

#include <stdlib.h>

#include <filesystem>
#include <string>

namespace c10d::inline v1::test {

class TempDir {
 public:
  TempDir() {
    char pattern[] = "/tmp/c10d-test-XXXXXX";
    const char* made = ::mkdtemp(pattern);
    path_ = made ? made : "";
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string operator/(const std::string& name) const { return path_ + "/" + name; }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace c10d::inline v1::test
