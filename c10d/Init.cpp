#include "c10d/Init.hpp"

#include <atomic>
#include <cstdlib>
#include <optional>
#include <vector>

#include "c10d/DefaultGroup.hpp"
#include "c10d/ErrorFile.hpp"
#include "c10d/core/Config.hpp"
#include "c10d/core/Exception.hpp"
#include "store/FileStore.hpp"
#include "store/HashStore.hpp"
#include "store/PrefixStore.hpp"
#include "store/PyTorchTCPStore.hpp"
#include "store/TCPStore.hpp"

namespace c10d::inline v1 {
namespace {

std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr || *value == '\0') return std::nullopt;
  return std::string(value);
}

std::string requireEnv(const char* name, const std::string& why) {
  std::optional<std::string> value = env(name);
  C10D_CHECK(value.has_value(), InvalidArgument, "environment variable ", name, " is not set (",
             why, ")");
  return *value;
}

}  // namespace

WorldInfo detectWorld(const InitOptions& options) {
  WorldInfo info;
  for (const config::Launcher& launcher : config::kLaunchers) {
    std::optional<int64_t> rank = config::launcherInteger(launcher.rank, 0, INT32_MAX);
    if (!rank) continue;
    std::optional<int64_t> size = config::launcherInteger(launcher.size, 1, INT32_MAX);
    C10D_CHECK(size.has_value(), InvalidArgument, launcher.rank, " is set but ", launcher.size,
               " is not");
    info.worldSize = static_cast<int>(*size);
    C10D_CHECK(*rank < *size, InvalidArgument, launcher.rank, "=", *rank, " is out of range for ",
               launcher.size, "=", *size);
    info.rank = static_cast<int>(*rank);
    if (auto local = config::launcherInteger(launcher.localRank, 0, INT32_MAX)) {
      info.localRank = static_cast<int>(*local);
    }
    info.source = launcher.name;
    break;
  }
  if (options.worldSize >= 0) {
    info.worldSize = options.worldSize;
    info.source = "InitOptions";
  }
  if (options.rank >= 0) info.rank = options.rank;
  C10D_CHECK(info.rank >= 0 && info.worldSize >= 1, InvalidArgument,
             "cannot tell this process's rank and world size: set RANK and WORLD_SIZE (c10drun "
             "and torchrun do), launch with mpirun (OMPI_COMM_WORLD_RANK), PMI (PMI_RANK) or "
             "srun (SLURM_PROCID), or pass InitOptions::rank and worldSize");
  C10D_CHECK(info.rank < info.worldSize, InvalidArgument, "rank ", info.rank,
             " is out of range for world size ", info.worldSize, " (from ", info.source, ")");
  return info;
}

std::chrono::milliseconds resolveTimeout(std::chrono::milliseconds timeout, const char* what) {
  if (timeout.count() != 0) {
    C10D_CHECK(timeout.count() > 0, InvalidArgument, what, " must be positive, got ",
               timeout.count(), " ms");
    return timeout;
  }
  return std::chrono::seconds(config::Settings().integer("C10D_TIMEOUT"));
}

namespace {

// Under torchrun's static rendezvous the agent hosts a PyTorch TCPStore at MASTER_ADDR:MASTER_PORT
// (so no rank can host ours there) and every worker is its client, under the key prefix of the
// restart attempt, as torch.distributed's workers are. Each successful initialisation in a process
// is one generation of keys of its own, so a group created again after destroy (same attempt,
// same agent store) does not meet the keys of the one before, and an initialisation that failed
// is retried in the same generation. Returns once every rank of this generation is there, like
// our own store's rendezvous, or names the ranks that are not.
std::shared_ptr<Store> agentStore(const std::string& host, const std::string& portText,
                                  const WorldInfo& world, std::chrono::milliseconds timeout) {
  static std::atomic<int> generations{0};
  auto port = static_cast<uint16_t>(config::requireInteger("MASTER_PORT", portText, 1, 65535));
  std::string attempt = env("TORCHELASTIC_RESTART_COUNT").value_or("0");
  std::string prefix = "/worker/attempt_" + attempt;
  auto store =
      std::make_shared<PrefixStore>(prefix, std::make_shared<PyTorchTCPStore>(host, port, timeout));
  const int generation = generations.load();
  const std::string here = "c10d/" + std::to_string(generation);
  auto arrived = [&](int rank) { return here + "/arrived/" + std::to_string(rank); };
  store->set(arrived(world.rank), toBytes(std::to_string(world.worldSize)));
  std::vector<std::string> everyone;
  for (int r = 0; r < world.worldSize; ++r) everyone.push_back(arrived(r));
  try {
    store->wait(everyone, timeout);
  } catch (const TimeoutError&) {
    std::string missing;
    for (int r = 0; r < world.worldSize; ++r) {
      if (!store->check({arrived(r)})) missing += (missing.empty() ? "" : ", ") + std::to_string(r);
    }
    C10D_THROW(TimeoutError, "rendezvous in torchrun's agent store ", host, ":", port,
               " (keys under '", prefix, "/", here, "/'): rank(s) ", missing,
               " did not arrive within ", timeout.count(),
               " ms. Check that every worker calls init, with the same WORLD_SIZE");
  }
  generations.fetch_add(1);
  return std::make_shared<PrefixStore>(here, store);
}

}  // namespace

std::shared_ptr<Store> connectStore(const InitOptions& options, const WorldInfo& world) {
  const std::chrono::milliseconds timeout = resolveTimeout(options.timeout);
  const std::string& method = options.initMethod;
  auto tcpStore = [&](const std::string& host, const std::string& portText) {
    auto port = static_cast<uint16_t>(config::requireInteger("port", portText, 1, 65535));
    TCPStoreOptions storeOptions;
    storeOptions.isServer = world.rank == 0 && config::value("C10D_STORE_HOST") == "rank0";
    storeOptions.numWorkers = world.worldSize;
    storeOptions.timeout = timeout;
    return std::make_shared<TCPStore>(host, port, storeOptions);
  };
  if (method == "env://") {
    const char* why = "the env:// init method needs the address of rank 0's store";
    std::string host = requireEnv("MASTER_ADDR", why);
    std::string port = requireEnv("MASTER_PORT", why);
    // c10drun says both: its launcher's store serves PyTorch's clients too, but ours is the one
    // that c10d/elastic's records and waits are written for.
    if (env("TORCHELASTIC_USE_AGENT_STORE").value_or("") == "True" &&
        config::value("C10D_STORE_HOST") != "launcher") {
      return agentStore(host, port, world, timeout);
    }
    return tcpStore(host, port);
  }
  if (method.rfind("tcp://", 0) == 0) {
    std::string rest = method.substr(6);
    size_t colon = rest.rfind(':');
    C10D_CHECK(colon != std::string::npos && colon > 0, InvalidArgument, "init method '", method,
               "' must be tcp://host:port");
    std::string host = rest.substr(0, colon);
    if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
      host = host.substr(1, host.size() - 2);  // [IPv6]
    }
    return tcpStore(host, rest.substr(colon + 1));
  }
  if (method.rfind("file://", 0) == 0) {
    std::string path = method.substr(7);
    C10D_CHECK(!path.empty(), InvalidArgument, "init method '", method,
               "' must be file:///absolute/path");
    return std::make_shared<FileStore>(path, world.worldSize, timeout);
  }
  C10D_THROW(InvalidArgument, "unknown init method '", method,
             "'; expected env://, tcp://host:port or file:///path");
}

std::shared_ptr<ProcessGroup> initProcessGroup(InitOptions options) {
  if (env("TORCHELASTIC_ERROR_FILE")) installErrorFileHandler();
  if (options.backend.empty()) options.backend = config::value("C10D_BACKEND");
  options.timeout = resolveTimeout(options.timeout);
  WorldInfo world = detectWorld(options);
  ProcessGroupOptions groupOptions;
  // MPI finds its peers itself: under mpirun an MPI-only job needs no MASTER_ADDR and no store.
  bool mpiOnly = true;
  // Checked before the store: a name only one rank refused would leave the others to die of a
  // reset connection when that rank (hosting the store) exits.
  for (const auto& [device, name] : parseBackendSpec(options.backend)) {
    requireBackend(name);
    mpiOnly &= name == "mpi";
  }
  config::Settings().checkAll();  // a malformed C10D_* variable, named, on every rank
  std::shared_ptr<Store> store;
  if (mpiOnly && options.initMethod == "env://" && !env("MASTER_ADDR").has_value()) {
    store = std::make_shared<HashStore>();
    groupOptions.storeIsShared = false;
  } else {
    store = connectStore(options, world);
  }
  groupOptions.backend = options.backend;
  groupOptions.timeout = options.timeout;
  groupOptions.groupName = options.groupName;
  groupOptions.localRank = world.localRank;
  auto group = std::make_shared<ProcessGroup>(store, world.rank, world.worldSize, groupOptions);
  setDefaultGroup(group);
  return group;
}

}  // namespace c10d::inline v1
