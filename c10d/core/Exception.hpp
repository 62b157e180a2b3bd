#pragma once

/// \file
/// The library's error types (Error, its subclasses and ErrorContext) and the C10D_CHECK and
/// C10D_THROW macros that throw them.

#include <cstdint>
#include <exception>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace c10d::inline v1 {

/// What an error is about, as fields a program can act on without parsing what(): which op, in
/// which group, on which rank, at which collective, and which other ranks it concerns. A field
/// the error does not know stays empty (-1 for numbers). what() says all of it too.
/// (Every member has an initializer, so designated initializers may name any few of them.)
struct ErrorContext {
  std::string op{};          ///< "allreduce", "send", "store get", an RPC function's name
  std::string group{};       ///< the process group's name
  int rank = -1;             ///< this process's rank in that group
  int64_t sequence = -1;     ///< the collective's number in its group, from 0 (collectives only)
  std::vector<int> peers{};  ///< the other ranks concerned: lost, behind, or a point-to-point peer
  std::string key{};         ///< a store key
  std::string worker{};      ///< an RPC worker's name
};

/// Base of every error the library throws. what() is the whole message: what failed, where
/// (rank, key, peer, op) and, when the fix is known, what to do; context() the same as fields.
class Error : public std::runtime_error {
 public:
  /// \param message The whole text what() returns.
  /// \param context The same facts as fields; empty by default (addContext can fill it later).
  explicit Error(const std::string& message, ErrorContext context = {})
      : std::runtime_error(message), context_(std::move(context)) {}

  /// \return The error's fields (those not known are empty, or -1 for numbers).
  const ErrorContext& context() const noexcept { return context_; }

  /// Sets the fields of context() that are still unset from more; what() stays as it is. For the
  /// code that throws or completes the error, before another thread can see it.
  /// \param more Fields to copy; only those still unset here are taken (non-empty, or >= 0).
  void addContext(const ErrorContext& more) {
    if (context_.op.empty()) context_.op = more.op;
    if (context_.group.empty()) context_.group = more.group;
    if (context_.rank < 0) context_.rank = more.rank;
    if (context_.sequence < 0) context_.sequence = more.sequence;
    if (context_.peers.empty()) context_.peers = more.peers;
    if (context_.key.empty()) context_.key = more.key;
    if (context_.worker.empty()) context_.worker = more.worker;
  }

 private:
  ErrorContext context_;
};

/// A blocking call (store wait/get, collective, p2p, RPC) ran past its deadline.
class TimeoutError : public Error {
 public:
  using Error::Error;
};

/// The store could not be reached, spoke the wrong protocol, or refused a request.
class StoreError : public Error {
 public:
  using Error::Error;
};

/// A communication backend (Gloo, MPI, NCCL, user-registered) failed an operation.
class BackendError : public Error {
 public:
  using Error::Error;
};

/// The caller passed something the library cannot accept (wrong dtype, size, rank, limit, a
/// variable's value). The object called stays usable.
class InvalidArgument : public Error {
 public:
  using Error::Error;
};

/// The call is well-formed, but what it was made on can no longer run it: a process group,
/// backend, RPC agent or transport that was shut down or closed, an RPC reference or autograd
/// context that was released. A call made after that state and one in flight when it began fail
/// alike, with this type. (A group broken by a failure is a BackendError; a lost peer's RPC
/// connection a RemoteError.)
class StateError : public Error {
 public:
  using Error::Error;
};

/// An error raised on another process (remote function, peer rank) and carried back here.
class RemoteError : public Error {
 public:
  using Error::Error;
};

/// A checkpoint that cannot be used as asked: incomplete (a save that did not finish), a missing
/// or truncated file, a checksum that does not match, a tensor or value the program expects that
/// it lacks (or holds one the program does not), a shape or dtype that differs. what() names the
/// checkpoint's folder, the tensor and, for data errors, the file and byte offset.
class CheckpointError : public Error {
 public:
  using Error::Error;
};

namespace detail {

/// A copy of error, of the same library type (a subclass of those below becomes that type),
/// carrying the same message and context: for code that fails several Works with one error, each
/// of which fills its own context into it (Work::setErrorContext). Anything else is returned as
/// it is.
inline std::exception_ptr copyError(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (const StateError& e) {
    return std::make_exception_ptr(StateError(e));
  } catch (const TimeoutError& e) {
    return std::make_exception_ptr(TimeoutError(e));
  } catch (const StoreError& e) {
    return std::make_exception_ptr(StoreError(e));
  } catch (const BackendError& e) {
    return std::make_exception_ptr(BackendError(e));
  } catch (const InvalidArgument& e) {
    return std::make_exception_ptr(InvalidArgument(e));
  } catch (const RemoteError& e) {
    return std::make_exception_ptr(RemoteError(e));
  } catch (const CheckpointError& e) {
    return std::make_exception_ptr(CheckpointError(e));
  } catch (const Error& e) {
    return std::make_exception_ptr(Error(e));
  } catch (...) {
    return error;
  }
}

template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}

}  // namespace detail
}  // namespace c10d::inline v1

/// Throws ErrorType (looked up where the macro is used) with the streamed arguments as message
/// when cond is false:
///
///     C10D_CHECK(rank < size, InvalidArgument, "rank ", rank, " out of range [0, ", size, ")");
///
/// The throw is a cold function of its own, so that a check costs the function it is in one
/// compare and branch: building the message would otherwise make every caller save registers
/// and set up a frame for it, on every call (it did on every op of a process group).
/// \param cond The condition that must hold; evaluated once.
/// \param ErrorType Error or a subclass of it, constructed from the message alone.
/// \param ... The message's parts, streamed with operator<< one after another, no separator;
///        evaluated only when cond is false.
#define C10D_CHECK(cond, ErrorType, ...)                         \
  do {                                                           \
    if (!(cond)) [[unlikely]] {                                  \
      ::c10d::detail::throwConcatenated<ErrorType>(__VA_ARGS__); \
    }                                                            \
  } while (0)

/// Throws ErrorType unconditionally, with the streamed arguments as message:
/// `C10D_THROW(StateError, "group ", name, " was shut down")`.
/// \param ErrorType Error or a subclass of it, constructed from the message alone.
/// \param ... The message's parts, streamed with operator<< one after another, no separator.
#define C10D_THROW(ErrorType, ...) throw ErrorType(::c10d::detail::concat(__VA_ARGS__))

namespace c10d::inline v1::detail {
/// C10D_CHECK's throw, out of line (its arguments are passed by reference).
template <typename ErrorType, typename... Args>
[[noreturn, gnu::cold, gnu::noinline]] void throwConcatenated(const Args&... args) {
  throw ErrorType(concat(args...));
}
}  // namespace c10d::inline v1::detail
