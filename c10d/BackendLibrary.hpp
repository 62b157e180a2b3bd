#pragma once

/// \file
/// Backends built as libraries of their own, loaded at first use, and the macro that defines
/// such a library's entry point.
///
/// The MPI and NCCL backends are libraries of their own (libc10d_mpi.so.1, libc10d_nccl.so.1), so
/// that libc10d.so starts on a machine without libmpi or libnccl: the backend registry loads a
/// backend's library the first time a group selects it by name.

#include <memory>
#include <span>

namespace c10d::inline v1 {

class Backend;
struct BackendContext;

namespace detail {

/// A backend library of this build.
struct BackendLibrary {
  const char* backend;  ///< the name groups select it by ("mpi")
  const char* file;     ///< its SONAME ("libc10d_mpi.so.1")
  const char* needs;    ///< what it loads in turn, for the error when it cannot be loaded
};

std::span<const BackendLibrary> backendLibraries();

/// Makes library's backend, loading the library on first use: from the folder libc10d.so was
/// loaded from, else by the loader's search path. Throws BackendError naming the backend, the
/// file, the loader's reason and what the library needs. Thread-safe; a library stays loaded.
std::shared_ptr<Backend> createFromLibrary(const BackendLibrary& library,
                                           const BackendContext& context);

}  // namespace detail
}  // namespace c10d::inline v1

/// Every backend library defines this function (C linkage, so the loader finds it by this name):
/// it returns a new backend that the caller owns. The name carries the C++ ABI's number (the
/// inline namespace's), so a library built for another ABI is not found rather than misused.
#define C10D_BACKEND_LIBRARY_ENTRY c10d_plugin_v1_create_backend
/// C10D_BACKEND_LIBRARY_ENTRY's name as a string, which the loader looks up (dlsym).
#define C10D_BACKEND_LIBRARY_ENTRY_NAME "c10d_plugin_v1_create_backend"
/// Defines a backend library's entry point (C10D_BACKEND_LIBRARY_ENTRY), once in the library's
/// source at global scope: it returns new BackendClass(context). The library must also be a
/// row of the build's table of backend libraries (c10d/BackendLibrary.cpp) to be found by name.
/// \param BackendClass the backend's class (qualified), constructible from a
///     const c10d::BackendContext&.
#define C10D_DEFINE_BACKEND_LIBRARY(BackendClass)                                                \
  extern "C" __attribute__((visibility("default"))) ::c10d::Backend* C10D_BACKEND_LIBRARY_ENTRY( \
      const ::c10d::BackendContext& context) {                                                   \
    return new BackendClass(context);                                                            \
  }
