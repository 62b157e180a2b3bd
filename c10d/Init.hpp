#pragma once

/// \file
/// initProcessGroup, which creates the job's default process group, and the steps it takes:
/// detectWorld, resolveTimeout and connectStore.

#include <chrono>
#include <memory>
#include <string>

#include "c10d/ProcessGroup.hpp"
#include "store/Store.hpp"

namespace c10d::inline v1 {

/// How initProcessGroup makes the job's default group. Its backend, rank, worldSize and timeout,
/// left unset, come from the environment.
struct InitOptions {
  /// Backend spec ("gloo", "cpu:gloo,cuda:nccl", a registered name). Empty: C10D_BACKEND, else
  /// "gloo".
  std::string backend;
  /// "env://" (default: MASTER_ADDR, MASTER_PORT), "tcp://host:port" or "file:///path".
  std::string initMethod = "env://";
  /// -1: from the environment: RANK/WORLD_SIZE, else Open MPI (OMPI_COMM_WORLD_RANK/SIZE), PMI
  /// (PMI_RANK/PMI_SIZE) or Slurm (SLURM_PROCID/SLURM_NTASKS).
  int rank = -1;
  /// The number of ranks; -1: from the environment, as rank.
  int worldSize = -1;
  /// Zero: C10D_TIMEOUT (seconds), else 30 minutes.
  std::chrono::milliseconds timeout{0};
  /// The group's name (ProcessGroupOptions::groupName).
  std::string groupName = "default";
};

/// Where this process is, resolved from InitOptions and the environment.
struct WorldInfo {
  int rank = -1;       ///< this process's rank, in [0, worldSize)
  int worldSize = -1;  ///< the number of ranks, at least 1
  int localRank = -1;  ///< -1: the launcher did not say
  std::string source;  ///< which variables gave rank and size, for messages
};

/// Rank, world size and local rank from the options or the environment, in the order
/// InitOptions documents. Throws InvalidArgument naming the variables it looked for.
/// \param options its rank and worldSize; each, unless -1, overrides the environment's.
/// \return Where this process is; the local rank comes from the launcher's variables only.
/// \throws InvalidArgument also for a rank not below the world size, or a launcher's rank
///         variable set without its size variable.
WorldInfo detectWorld(const InitOptions& options);

/// A timeout given as 0 (InitOptions', ElasticOptions' "unset") resolved: C10D_TIMEOUT seconds.
/// Throws InvalidArgument naming what when it is negative.
/// \param timeout the timeout given; 0: unset.
/// \param what what the timeout is, for the error message.
/// \return timeout when positive; for 0, C10D_TIMEOUT seconds (default 1800).
std::chrono::milliseconds resolveTimeout(std::chrono::milliseconds timeout,
                                         const char* what = "init timeout");

/// The store of options.initMethod for this process: env:// and tcp:// connect to a TCPStore that
/// rank 0 hosts (C10D_STORE_HOST=launcher, which c10drun sets: that the launcher hosts) and return
/// once all world.worldSize ranks are there; file:// opens a FileStore.
/// Under torchrun's static rendezvous (TORCHELASTIC_USE_AGENT_STORE=True), env:// instead joins
/// the PyTorch TCPStore torchrun's agent hosts at MASTER_ADDR:MASTER_PORT, under the key prefix
/// /worker/attempt_\<TORCHELASTIC_RESTART_COUNT\> (store/PyTorchTCPStore.hpp). c10drun sets that
/// variable too, for torch.distributed programs, but with C10D_STORE_HOST=launcher ours stays a
/// client of our protocol.
/// Throws InvalidArgument for a bad init method or a missing MASTER_ADDR/MASTER_PORT (named),
/// TimeoutError when the other ranks do not show up within the timeout.
/// \param options the init method and the timeout (0: resolveTimeout's).
/// \param world this process's rank and the world size (detectWorld).
/// \return The job's store, shared by the ranks.
std::shared_ptr<Store> connectStore(const InitOptions& options, const WorldInfo& world);

/// Creates the job's default process group: connectStore, then the backends, and makes it the
/// process's default (c10d/DefaultGroup.hpp: getRank(), destroyProcessGroup(), ...). Every rank
/// must call it. Under a launcher that names an error file (TORCHELASTIC_ERROR_FILE), an exception
/// that escapes main is written there too (c10d/ErrorFile.hpp). A job whose backends are all "mpi",
/// started by mpirun with env:// and no MASTER_ADDR, gets no shared store (MPI finds the peers; see
/// ProcessGroupOptions::storeIsShared). Throws InvalidArgument for a bad init method or a missing
/// variable (named), TimeoutError when the other ranks do not show up within the timeout.
/// \param options the backend, init method, rank, world size, timeout and name of the group.
/// \return The group, now the process's default.
/// \throws InvalidArgument also for a backend spec that is malformed or names a backend that
///         is not registered, and for a malformed C10D_* variable (named).
std::shared_ptr<ProcessGroup> initProcessGroup(InitOptions options = {});

}  // namespace c10d::inline v1
