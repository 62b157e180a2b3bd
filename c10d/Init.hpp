#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "c10d/ProcessGroup.hpp"
#include "store/Store.hpp"

namespace c10d::inline v1 {

struct InitOptions {
  /// Backend spec ("gloo", "cpu:gloo,cuda:nccl", a registered name). Empty: C10D_BACKEND, else
  /// "gloo".
  std::string backend;
  /// "env://" (default: MASTER_ADDR, MASTER_PORT), "tcp://host:port" or "file:///path".
  std::string initMethod = "env://";
  /// -1: from the environment: RANK/WORLD_SIZE, else Open MPI (OMPI_COMM_WORLD_RANK/SIZE), PMI
  /// (PMI_RANK/PMI_SIZE) or Slurm (SLURM_PROCID/SLURM_NTASKS).
  int rank = -1;
  int worldSize = -1;
  /// Zero: C10D_TIMEOUT (seconds), else 30 minutes.
  std::chrono::milliseconds timeout{0};
  std::string groupName = "default";
};

/// Where this process is, resolved from InitOptions and the environment.
struct WorldInfo {
  int rank = -1;
  int worldSize = -1;
  int localRank = -1;  ///< -1: the launcher did not say
  std::string source;  ///< which variables gave rank and size, for messages
};

/// Rank, world size and local rank from the options or the environment, in the order
/// InitOptions documents. Throws InvalidArgument naming the variables it looked for.
WorldInfo detectWorld(const InitOptions& options);

/// A timeout given as 0 (InitOptions', ElasticOptions' "unset") resolved: C10D_TIMEOUT seconds.
/// Throws InvalidArgument naming what when it is negative.
std::chrono::milliseconds resolveTimeout(std::chrono::milliseconds timeout,
                                         const char* what = "init timeout");

/// The store of options.initMethod for this process: env:// and tcp:// connect to a TCPStore that
/// rank 0 hosts (C10D_STORE_HOST=launcher, which c10drun sets: that the launcher hosts) and return
/// once all world.worldSize ranks are there; file:// opens a FileStore.
/// Under torchrun's static rendezvous (TORCHELASTIC_USE_AGENT_STORE=True), env:// instead joins
/// the PyTorch TCPStore torchrun's agent hosts at MASTER_ADDR:MASTER_PORT, under the key prefix
/// /worker/attempt_<TORCHELASTIC_RESTART_COUNT> (store/PyTorchTCPStore.hpp). c10drun sets that
/// variable too, for torch.distributed programs, but with C10D_STORE_HOST=launcher ours stays a
/// client of our protocol.
/// Throws InvalidArgument for a bad init method or a missing MASTER_ADDR/MASTER_PORT (named),
/// TimeoutError when the other ranks do not show up within the timeout.
std::shared_ptr<Store> connectStore(const InitOptions& options, const WorldInfo& world);

/// Creates the job's default process group: connectStore, then the backends, and makes it the
/// process's default (c10d/DefaultGroup.hpp: getRank(), destroyProcessGroup(), ...). Every rank
/// must call it. Under a launcher that names an error file (TORCHELASTIC_ERROR_FILE), an exception
/// that escapes main is written there too (c10d/ErrorFile.hpp). A job whose backends are all "mpi",
/// started by mpirun with env:// and no MASTER_ADDR, gets no shared store (MPI finds the peers; see
/// ProcessGroupOptions::storeIsShared). Throws InvalidArgument for a bad init method or a missing
/// variable (named), TimeoutError when the other ranks do not show up within the timeout.
std::shared_ptr<ProcessGroup> initProcessGroup(InitOptions options = {});

}  // namespace c10d::inline v1
