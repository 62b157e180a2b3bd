# The installed headers: c10d's public surface (paths in the tree, kept under include/c10d/).
# A header not listed here is private: it may change or go without a CHANGELOG entry.
set(C10D_PUBLIC_HEADERS
  # core types, errors, configuration
  c10d/core/Config.hpp c10d/core/Cores.hpp c10d/core/Cuda.hpp c10d/core/Device.hpp
  c10d/core/Exception.hpp c10d/core/Half.hpp c10d/core/HostBlockCache.hpp c10d/core/Json.hpp
  c10d/core/Kernels.hpp c10d/core/Logging.hpp c10d/core/ReduceOp.hpp c10d/core/ScalarType.hpp
  c10d/core/Settings.hpp
  c10d/core/Signals.hpp c10d/core/Tensor.hpp c10d/core/ThreadName.hpp
  c10d/net/Auth.hpp c10d/net/Spin.hpp
  # stores
  store/Store.hpp store/HashStore.hpp store/FileStore.hpp store/PrefixStore.hpp
  store/TCPStore.hpp store/PyTorchTCPStore.hpp store/CountingStore.hpp
  # the process group
  c10d/Backend.hpp c10d/BackendLibrary.hpp c10d/CollectiveCheck.hpp c10d/DefaultGroup.hpp
  c10d/DeviceMesh.hpp c10d/ErrorFile.hpp c10d/FlightRecorder.hpp c10d/FlightRecorderSignal.hpp
  c10d/Init.hpp c10d/ObjectCollectives.hpp c10d/Op.hpp c10d/Options.hpp c10d/ProcessGroup.hpp
  c10d/Subgroups.hpp c10d/Work.hpp
  # over process groups
  c10d/training/DataParallelOptimizer.hpp c10d/training/DistributedDataParallel.hpp
  c10d/training/DistributedSampler.hpp c10d/training/FusionQueue.hpp
  c10d/training/HostValues.hpp c10d/training/Join.hpp c10d/training/Optimizers.hpp
  c10d/training/PowerSgd.hpp
  c10d/parallel/FullySharded.hpp c10d/parallel/Layout.hpp c10d/parallel/Pipeline.hpp
  c10d/parallel/ZeroOptimizer.hpp
  c10d/checkpoint/Checkpoint.hpp c10d/checkpoint/Metadata.hpp c10d/checkpoint/State.hpp
  c10d/elastic/ElasticGroup.hpp c10d/elastic/LauncherKeys.hpp c10d/elastic/ShardCopies.hpp
  # RPC
  rpc/Future.hpp rpc/RRef.hpp rpc/RpcAgent.hpp rpc/Serialization.hpp rpc/transport/Msgpack.hpp
  rpc/autograd/DistAutograd.hpp rpc/autograd/DistributedOptimizer.hpp
  # the C API
  c10d/capi/c10d.h c10d/capi/common.h c10d/capi/store.h c10d/capi/group.h c10d/capi/ops.h
  c10d/capi/work.h c10d/capi/ddp.h c10d/capi/rpc.h c10d/capi/checkpoint.h c10d/capi/elastic.h)
# Only for handing in a communicator (newMpiProcessGroup); it includes <mpi.h>.
set(C10D_PUBLIC_MPI_HEADERS backends/mpi/MpiBackend.hpp)
set(C10D_PUBLIC_NCCL_HEADERS backends/nccl/NcclBackend.hpp)
