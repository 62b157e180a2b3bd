// What every process-group example shares: joining the default group, checking results against
// values the example computes itself, and turning the outcome into an exit status.
#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <memory>
#include <string>

#include "c10d/Exception.hpp"
#include "c10d/Init.hpp"
#include "c10d/Tensor.hpp"

namespace examples {

// Records failed checks instead of stopping at the first one: a rank that left early would make
// its peers wait in their next collective until the timeout, hiding the real failure behind a
// TimeoutError on another rank.
class Checker {
 public:
  Checker(const char* program, int rank) : program_(program), rank_(rank) {}

  template <typename... Args>
  bool expect(bool condition, const Args&... what) {
    if (!condition) fail(c10d::detail::concat(what...));
    return condition;
  }

  // Compares every element of tensor with expected(i); reports the first mismatch only, since
  // one wrong element usually means a whole wrong chunk.
  template <typename T, typename Expected>
  bool expectValues(const c10d::Tensor& tensor, const Expected& expected, const std::string& what) {
    const T* data = tensor.data<T>();
    for (int64_t i = 0; i < tensor.numel(); ++i) {
      if (data[i] != expected(i)) {
        fail(c10d::detail::concat(what, ": element ", i, " is ", +data[i], ", expected ",
                                  +expected(i)));
        return false;
      }
    }
    return true;
  }

  void fail(const std::string& what) {
    ++failures_;
    std::fprintf(stderr, "%s: rank %d: %s\n", program_, rank_, what.c_str());
  }

  int failures() const { return failures_; }

 private:
  const char* program_;
  int rank_;
  int failures_ = 0;
};

// Sets tensor[i] = value(i).
template <typename T, typename Value>
void fill(const c10d::Tensor& tensor, const Value& value) {
  T* data = tensor.data<T>();
  for (int64_t i = 0; i < tensor.numel(); ++i) data[i] = value(i);
}

// Joins the default process group (env://, backend from C10D_BACKEND, default gloo), runs body,
// then waits in a barrier so that rank 0, which hosts the store, does not leave while its peers
// still talk to it. Returns the exit status: 0 only when nothing threw and no check failed.
inline int runExample(const char* program,
                      const std::function<void(c10d::ProcessGroup&, Checker&)>& body) {
  // Launchers kill the other ranks once one fails; line buffering keeps what they printed so far.
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  int rank = -1;
  try {
    std::shared_ptr<c10d::ProcessGroup> pg = c10d::initProcessGroup();
    rank = pg->rank();
    Checker checker(program, rank);
    body(*pg, checker);
    pg->barrier()->wait();
    if (checker.failures() > 0) {
      std::fprintf(stderr, "%s: rank %d: %d check(s) failed\n", program, rank, checker.failures());
      return 1;
    }
    return 0;
  } catch (const c10d::Error& e) {
    if (rank < 0) {
      std::fprintf(stderr, "%s: joining the process group failed: %s\n", program, e.what());
    } else {
      std::fprintf(stderr, "%s: rank %d: %s\n", program, rank, e.what());
    }
    return 1;
  }
}

}  // namespace examples
