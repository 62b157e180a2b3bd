#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace c10d::inline v0 {

// Base of every error the library throws. what() is the whole message: what failed, where
// (rank, key, peer, op) and, when the fix is known, what to do.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

// A blocking call (store wait/get, collective, p2p, RPC) ran past its deadline.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

// The store could not be reached, spoke the wrong protocol, or refused a request.
class StoreError : public Error {
 public:
  using Error::Error;
};

// A communication backend (Gloo, MPI, NCCL, user-registered) failed an operation.
class BackendError : public Error {
 public:
  using Error::Error;
};

// The caller passed something the library cannot accept (wrong dtype, size, rank, limit).
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

// An error raised on another process (remote function, peer rank) and carried back here.
class RemoteError : public Error {
 public:
  using Error::Error;
};

namespace detail {

template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

}  // namespace detail
}  // namespace c10d::inline v0

// Throws ErrorType (looked up where the macro is used) with the streamed arguments as message
// when cond is false:
//   C10D_CHECK(rank < size, InvalidArgument, "rank ", rank, " out of range [0, ", size, ")");
#define C10D_CHECK(cond, ErrorType, ...)                               \
  do {                                                                 \
    if (!(cond)) throw ErrorType(::c10d::detail::concat(__VA_ARGS__)); \
  } while (0)

#define C10D_THROW(ErrorType, ...) throw ErrorType(::c10d::detail::concat(__VA_ARGS__))
