#include "c10d/BackendLibrary.hpp"

#include <dlfcn.h>

#include <map>
#include <mutex>
#include <string>

#include "c10d/Backend.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v1::detail {

namespace {

// The SONAMEs come from CMake (C10D_<NAME>_LIBRARY), so they follow the project's version.
constexpr BackendLibrary kLibraries[] = {
#ifdef C10D_MPI_LIBRARY
    {"mpi", C10D_MPI_LIBRARY, "Open MPI's libmpi.so.40 (apt-get install libopenmpi3)"},
#endif
#ifdef C10D_NCCL_LIBRARY
    {"nccl", C10D_NCCL_LIBRARY,
     "NCCL's libnccl.so.2 (from the CUDA Toolkit or NCCL's packages, found through ldconfig or "
     "LD_LIBRARY_PATH)"},
#endif
    {nullptr, nullptr, nullptr},  // keeps the array non-empty in a build with neither
};

using Entry = Backend* (*)(const BackendContext&);

// The folder libc10d.so was loaded from: where CMake puts the backend libraries beside it, in
// the build tree and in an installed prefix alike.
std::string ownFolder() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&backendLibraries), &info) == 0 || info.dli_fname == nullptr) {
    return {};
  }
  std::string path = info.dli_fname;
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? std::string() : path.substr(0, slash + 1);
}

Entry load(const BackendLibrary& library) {
  static std::mutex mutex;
  static std::map<std::string, Entry> loaded;
  std::lock_guard<std::mutex> guard(mutex);
  if (auto it = loaded.find(library.backend); it != loaded.end()) return it->second;

  // RTLD_GLOBAL: an Open MPI built with components (mca_*.so) that are not linked against libmpi
  // finds libmpi's symbols in the global scope only, as when a program links libmpi itself
  // (mpi4py loads libmpi globally for the same reason); Debian's Open MPI 4.1 passes the MPI
  // tests either way. Our library exports only c10d::v1 names and its entry point
  // (cmake/exports.map), so nothing of ours becomes global that was not already.
  const int flags = RTLD_NOW | RTLD_GLOBAL;
  std::string path = ownFolder() + library.file;
  void* handle = dlopen(path.c_str(), flags);
  std::string besideError;
  if (handle == nullptr) {
    besideError = dlerror();
    path = library.file;
    handle = dlopen(path.c_str(), flags);
  }
  if (handle == nullptr) {
    std::string searchError = dlerror();
    C10D_THROW(BackendError, "backend '", library.backend, "' is in ", library.file,
               ", which could not be loaded: ", besideError,
               besideError == searchError ? "" : "; by the loader's search path: " + searchError,
               ". It needs ", library.needs,
               ". A program that selects only other backends never loads it.");
  }
  auto entry = reinterpret_cast<Entry>(dlsym(handle, C10D_BACKEND_LIBRARY_ENTRY_NAME));
  C10D_CHECK(entry != nullptr, BackendError, "backend '", library.backend, "': ", path,
             " has no entry point " C10D_BACKEND_LIBRARY_ENTRY_NAME
             "; it is not a c10d backend library of this version");
  loaded.emplace(library.backend, entry);
  return entry;
}

}  // namespace

std::span<const BackendLibrary> backendLibraries() {
  return {kLibraries, std::size(kLibraries) - 1};
}

std::shared_ptr<Backend> createFromLibrary(const BackendLibrary& library,
                                           const BackendContext& context) {
  return std::shared_ptr<Backend>(load(library)(context));
}

}  // namespace c10d::inline v1::detail
