# pkg-config files beside the CMake package, for projects built with Make, Meson, Bazel or by
# hand: c10d (C++), c10d-rpc, c10d-c (the C API), and c10d-mpi / c10d-nccl where those backends
# are built. `pkg-config --cflags --libs c10d` then gives what find_package(c10d) and
# c10d::c10d give a CMake project. Each file finds the install from its own place
# (${pcfiledir}), so the installed tree stays relocatable, as the CMake package is.

set(C10D_PKGCONFIG_DIR "${CMAKE_INSTALL_LIBDIR}/pkgconfig")
if(IS_ABSOLUTE "${CMAKE_INSTALL_LIBDIR}" OR IS_ABSOLUTE "${CMAKE_INSTALL_INCLUDEDIR}")
  # Directories given as absolute paths stay where they were given.
  set(C10D_PC_PREFIX "${CMAKE_INSTALL_PREFIX}")
  set(C10D_PC_LIBDIR "${CMAKE_INSTALL_FULL_LIBDIR}")
  set(C10D_PC_INCLUDEDIR "${CMAKE_INSTALL_FULL_INCLUDEDIR}")
else()
  file(RELATIVE_PATH up "/prefix/${C10D_PKGCONFIG_DIR}" "/prefix")  # ../..
  string(REGEX REPLACE "/$" "" up "${up}")
  set(C10D_PC_PREFIX "\${pcfiledir}/${up}")
  set(C10D_PC_LIBDIR "\${prefix}/${CMAKE_INSTALL_LIBDIR}")
  set(C10D_PC_INCLUDEDIR "\${prefix}/${CMAKE_INSTALL_INCLUDEDIR}")
endif()

# -I flags for header folders a consumer needs that the compiler does not search already.
function(c10d_pc_include_flags out)
  set(flags "")
  foreach(dir ${ARGN})
    if(dir AND NOT dir IN_LIST CMAKE_CXX_IMPLICIT_INCLUDE_DIRECTORIES)
      string(APPEND flags " -I${dir}")
    endif()
  endforeach()
  set(${out} "${flags}" PARENT_SCOPE)
endfunction()

# c10d_pkgconfig_file(NAME LIBRARY DESCRIPTION [REQUIRES ...] [CFLAGS ...] [LIBS ...])
function(c10d_pkgconfig_file name library description)
  cmake_parse_arguments(PC "" "" "REQUIRES;CFLAGS;LIBS" ${ARGN})
  set(C10D_PC_NAME "${name}")
  set(C10D_PC_LIBRARY "${library}")
  set(C10D_PC_DESCRIPTION "${description}")
  set(C10D_PC_REQUIRES_LINE "")
  if(PC_REQUIRES)
    string(JOIN ", " requires ${PC_REQUIRES})
    set(C10D_PC_REQUIRES_LINE "Requires: ${requires}\n")
  endif()
  string(JOIN " " C10D_PC_CFLAGS ${PC_CFLAGS})
  string(JOIN " " C10D_PC_LIBS ${PC_LIBS})
  if(C10D_PC_CFLAGS)
    set(C10D_PC_CFLAGS " ${C10D_PC_CFLAGS}")
  endif()
  if(C10D_PC_LIBS)
    set(C10D_PC_LIBS " ${C10D_PC_LIBS}")
  endif()
  configure_file("${PROJECT_SOURCE_DIR}/cmake/c10d.pc.in"
    "${PROJECT_BINARY_DIR}/pkgconfig/${name}.pc" @ONLY)
  install(FILES "${PROJECT_BINARY_DIR}/pkgconfig/${name}.pc" DESTINATION ${C10D_PKGCONFIG_DIR}
    COMPONENT dev)
endfunction()

get_target_property(C10D_PC_DLPACK_INCLUDE dlpack::dlpack INTERFACE_INCLUDE_DIRECTORIES)
c10d_pc_include_flags(C10D_PC_DEPENDENCY_INCLUDES
  ${C10D_PC_DLPACK_INCLUDE} ${C10D_MSGPACK_INCLUDE_DIR})
c10d_pkgconfig_file(c10d c10d
  "Distributed-training communication: process groups, collectives, stores (C++20)"
  CFLAGS -DMSGPACK_NO_BOOST -pthread ${C10D_PC_DEPENDENCY_INCLUDES}
  LIBS -pthread)
c10d_pkgconfig_file(c10d-rpc c10d_rpc "c10d's RPC: remote calls, RRefs, distributed autograd"
  REQUIRES c10d)
c10d_pkgconfig_file(c10d-c c10d_c "c10d's C API (c10d/capi/c10d.h)")
if(TARGET c10d_mpi)
  # Its header includes <mpi.h>: MPI's own pkg-config package where it has one.
  set(C10D_PC_MPI_REQUIRES "")
  set(C10D_PC_MPI_FLAGS "")
  set(C10D_PC_MPI_LIBS "")
  foreach(candidate ompi-c mpich mpi-c)
    pkg_check_modules(C10D_PC_MPI_${candidate} QUIET ${candidate})
    if(C10D_PC_MPI_${candidate}_FOUND)
      set(C10D_PC_MPI_REQUIRES ${candidate})
      break()
    endif()
  endforeach()
  if(NOT C10D_PC_MPI_REQUIRES)  # none: the flags CMake's FindMPI found
    c10d_pc_include_flags(C10D_PC_MPI_FLAGS ${MPI_C_INCLUDE_DIRS})
    set(C10D_PC_MPI_LIBS ${MPI_C_LIBRARIES})
  endif()
  c10d_pkgconfig_file(c10d-mpi c10d_mpi
    "c10d's MPI backend, for handing in a communicator (newMpiProcessGroup)"
    REQUIRES c10d ${C10D_PC_MPI_REQUIRES}
    CFLAGS -DOMPI_SKIP_MPICXX=1 ${C10D_PC_MPI_FLAGS}
    LIBS ${C10D_PC_MPI_LIBS})
endif()
if(TARGET c10d_nccl)
  c10d_pkgconfig_file(c10d-nccl c10d_nccl "c10d's NCCL backend (backends/nccl/NcclBackend.hpp)"
    REQUIRES c10d)
endif()
