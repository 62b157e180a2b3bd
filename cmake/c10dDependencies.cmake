# Finds what c10d builds against. Each backend is a cache option AUTO|ON|OFF: AUTO builds the
# backend when its dependency is found, ON makes a missing dependency an error, OFF skips it.

find_package(Threads REQUIRED)
find_package(PkgConfig REQUIRED)
pkg_check_modules(LIBUV REQUIRED IMPORTED_TARGET libuv>=1.40)
find_package(dlpack REQUIRED)
# libcrypto for the HMAC of C10D_AUTH_TOKEN authentication (apt-get install libssl-dev).
find_package(OpenSSL REQUIRED COMPONENTS Crypto)
# Checkpoints: XXH3 checksums of every block written (apt-get install libxxhash-dev) and JSON for
# their metadata and safetensors headers (apt-get install nlohmann-json3-dev, header-only, used
# only inside the library).
pkg_check_modules(XXHASH REQUIRED IMPORTED_TARGET libxxhash)
find_package(nlohmann_json 3.9 REQUIRED)

set(C10D_CUDA_ROOT "/usr/local/cuda" CACHE PATH "CUDA Toolkit (and NCCL) location")

foreach(option C10D_USE_GLOO C10D_USE_MPI C10D_USE_NCCL C10D_USE_CUDA)
  set(${option} AUTO CACHE STRING "Build this part: AUTO (when found), ON (required) or OFF")
  set_property(CACHE ${option} PROPERTY STRINGS AUTO ON OFF)
  if(NOT ${option} MATCHES "^(AUTO|ON|OFF)$")
    message(FATAL_ERROR "${option} must be AUTO, ON or OFF, not '${${option}}'")
  endif()
endforeach()

# c10d_resolve(<option> <found> <what>) sets <option>_ENABLED.
function(c10d_resolve option found what)
  if(${option} STREQUAL "OFF")
    set(${option}_ENABLED OFF PARENT_SCOPE)
  elseif(found)
    set(${option}_ENABLED ON PARENT_SCOPE)
  elseif(${option} STREQUAL "ON")
    message(FATAL_ERROR "${option}=ON but ${what} was not found")
  else()
    set(${option}_ENABLED OFF PARENT_SCOPE)
  endif()
endfunction()

if(NOT C10D_USE_GLOO STREQUAL "OFF")
  find_package(Gloo QUIET)
endif()
c10d_resolve(C10D_USE_GLOO "${Gloo_FOUND}" "Gloo (apt-get install libgloo-dev)")

if(NOT C10D_USE_MPI STREQUAL "OFF")
  find_package(MPI QUIET COMPONENTS C)
endif()
c10d_resolve(C10D_USE_MPI "${MPI_C_FOUND}" "MPI (apt-get install libopenmpi-dev openmpi-bin)")

set(_c10d_cuda_found OFF)
if(NOT C10D_USE_CUDA STREQUAL "OFF" OR NOT C10D_USE_NCCL STREQUAL "OFF")
  set(CUDAToolkit_ROOT "${C10D_CUDA_ROOT}")
  find_package(CUDAToolkit QUIET)
  set(_c10d_cuda_found ${CUDAToolkit_FOUND})
endif()
c10d_resolve(C10D_USE_CUDA "${_c10d_cuda_found}" "the CUDA Toolkit (in ${C10D_CUDA_ROOT})")

set(_c10d_nccl_found OFF)
if(NOT C10D_USE_NCCL STREQUAL "OFF" AND C10D_USE_CUDA_ENABLED)
  find_path(C10D_NCCL_INCLUDE_DIR nccl.h HINTS "${C10D_CUDA_ROOT}/include")
  find_library(C10D_NCCL_LIBRARY nccl HINTS "${C10D_CUDA_ROOT}/lib64" "${C10D_CUDA_ROOT}/lib")
  if(C10D_NCCL_INCLUDE_DIR AND C10D_NCCL_LIBRARY)
    set(_c10d_nccl_found ON)
  endif()
endif()
c10d_resolve(C10D_USE_NCCL "${_c10d_nccl_found}" "NCCL (nccl.h and libnccl in ${C10D_CUDA_ROOT}) with CUDA")

set(C10D_WITH_CUDA ${C10D_USE_CUDA_ENABLED})
set(C10D_BACKENDS_BUILT "")
if(C10D_USE_GLOO_ENABLED)
  list(APPEND C10D_BACKENDS_BUILT gloo)
endif()
if(C10D_USE_MPI_ENABLED)
  list(APPEND C10D_BACKENDS_BUILT mpi)
endif()
if(C10D_USE_NCCL_ENABLED)
  list(APPEND C10D_BACKENDS_BUILT nccl)
endif()

# Links target against what the enabled parts of the core library need (Gloo, the CUDA runtime).
# Everything stays PRIVATE: c10d's public headers include none of these libraries, so consumers
# need only dlpack.
function(c10d_link_backends target)
  if(C10D_USE_GLOO_ENABLED)
    # backends/gloo: the backend (set-up, op table), its ops (which path each op takes), the
    # mesh's algorithms, its transport, and tagged point-to-point.
    target_sources(${target} PRIVATE
      backends/gloo/GlooBackend.cpp
      backends/gloo/ops/Allgather.cpp
      backends/gloo/ops/Allreduce.cpp
      backends/gloo/ops/Alltoall.cpp
      backends/gloo/ops/Barrier.cpp
      backends/gloo/ops/Broadcast.cpp
      backends/gloo/ops/Gather.cpp
      backends/gloo/ops/Reduce.cpp
      backends/gloo/ops/ReduceScatter.cpp
      backends/gloo/ops/Scatter.cpp
      backends/gloo/algorithms/Allgather.cpp
      backends/gloo/algorithms/Allreduce.cpp
      backends/gloo/algorithms/Alltoall.cpp
      backends/gloo/algorithms/Barrier.cpp
      backends/gloo/algorithms/Broadcast.cpp
      backends/gloo/algorithms/CostModel.cpp
      backends/gloo/algorithms/Exchange.cpp
      backends/gloo/algorithms/Reduce.cpp
      backends/gloo/algorithms/ReduceScatter.cpp
      backends/gloo/algorithms/Topology.cpp
      backends/gloo/transport/SyncMesh.cpp
      backends/gloo/p2p/PointToPoint.cpp
      backends/gloo/p2p/SharedPointToPoint.cpp)
    target_link_libraries(${target} PRIVATE gloo)
    target_compile_definitions(${target} PRIVATE C10D_WITH_GLOO=1)
  endif()
  # The MPI and NCCL backends are libraries of their own (c10d_add_backend_libraries); libc10d
  # only knows their SONAMEs, to load one when a group selects it.
  if(C10D_USE_MPI_ENABLED)
    target_compile_definitions(${target} PRIVATE
      C10D_MPI_LIBRARY="$<TARGET_SONAME_FILE_NAME:c10d_mpi>")
  endif()
  if(C10D_USE_NCCL_ENABLED)
    target_compile_definitions(${target} PRIVATE
      C10D_NCCL_LIBRARY="$<TARGET_SONAME_FILE_NAME:c10d_nccl>")
  endif()
  if(C10D_WITH_CUDA)
    # The static runtime keeps libc10d.so loadable on machines without the toolkit's libraries.
    target_link_libraries(${target} PRIVATE CUDA::cudart_static)
    target_compile_definitions(${target} PRIVATE C10D_WITH_CUDA=1)
  endif()
endfunction()

# libc10d_mpi.so and libc10d_nccl.so: the MPI and NCCL backends, each linked against its
# communication library and libc10d, loaded by libc10d (c10d/BackendLibrary.cpp) when a group
# selects the backend. A program that hands in its own MPI communicator (newMpiProcessGroup)
# links c10d::mpi itself.
function(c10d_add_backend_libraries)
  if(C10D_USE_MPI_ENABLED)
    c10d_backend_library(mpi
      backends/mpi/MpiBackend.cpp backends/mpi/MpiProgress.cpp backends/mpi/MpiTypes.cpp)
    # Its public header includes <mpi.h>: MPI's C API, without Open MPI's deprecated C++ bindings
    # (which would need libmpi_cxx), in whatever order a program includes the two headers.
    target_link_libraries(c10d_mpi PUBLIC MPI::MPI_C)
    target_compile_definitions(c10d_mpi PUBLIC OMPI_SKIP_MPICXX=1)
  endif()
  if(C10D_USE_NCCL_ENABLED)
    c10d_backend_library(nccl
      backends/nccl/NcclBackend.cpp backends/nccl/NcclCommunicator.cpp backends/nccl/NcclTypes.cpp
      backends/nccl/NcclWatchdog.cpp)
    target_include_directories(c10d_nccl PRIVATE ${C10D_NCCL_INCLUDE_DIR})
    # A static CUDA runtime of its own: libc10d's copy is local to libc10d (cmake/exports.map).
    target_link_libraries(c10d_nccl PRIVATE ${C10D_NCCL_LIBRARY} CUDA::cudart_static)
    target_compile_definitions(c10d_nccl PRIVATE C10D_WITH_CUDA=1)
  endif()
endfunction()

function(c10d_backend_library name)
  add_library(c10d_${name} SHARED ${ARGN})
  add_library(c10d::${name} ALIAS c10d_${name})
  c10d_shared_library_abi(c10d_${name})
  set_target_properties(c10d_${name} PROPERTIES
    VERSION ${C10D_CXX_ABI_VERSION}.0.0
    SOVERSION ${C10D_CXX_ABI_VERSION}
    EXPORT_NAME ${name}
    INSTALL_RPATH "$ORIGIN")
  target_compile_options(c10d_${name} PRIVATE -Wall -Wextra)
  target_include_directories(c10d_${name} PRIVATE ${PROJECT_SOURCE_DIR})
  target_link_libraries(c10d_${name} PUBLIC c10d::c10d)
endfunction()
