#pragma once

/// \file
/// The Open MPI backend ("mpi"), for a program that initialised MPI itself and hands c10d its
/// communicator (newMpiProcessGroup); selecting the backend by name (C10D_BACKEND=mpi) needs
/// nothing from this header. It includes <mpi.h>, so a program that includes it compiles and
/// links against MPI itself (CMake: c10d::mpi).
///
/// MPI's C API only: Open MPI's deprecated C++ bindings would need libmpi_cxx at link time.
#ifndef OMPI_SKIP_MPICXX
/// Keeps Open MPI's <mpi.h> from including its C++ bindings (unless the includer set it).
#define OMPI_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <memory>

#include "c10d/ProcessGroup.hpp"

namespace c10d::inline v1 {

/// A process group over comm, for a program that initialised MPI itself (with
/// MPI_THREAD_MULTIPLE). Rank and size are comm's; the backend works on a duplicate of comm, so
/// the program's own traffic on comm never mixes with it. There is no shared store: split
/// exchanges colors through MPI and monitoredBarrier is unavailable. comm must outlive nothing:
/// the duplicate is the group's. Throws BackendError when MPI is not initialised or lacks
/// MPI_THREAD_MULTIPLE.
/// \param comm The communicator whose ranks form the group; duplicated here.
/// \param options The group's options; backend and storeIsShared are set here ("mpi", false).
/// \return The new process group.
std::shared_ptr<ProcessGroup> newMpiProcessGroup(MPI_Comm comm, ProcessGroupOptions options = {});

}  // namespace c10d::inline v1
