#include "c10d/Rendezvous.hpp"

#include <charconv>
#include <cstdlib>
#include <string_view>

#include "c10d/Exception.hpp"
#include "c10d/store/TCPStore.hpp"

namespace c10d {
namespace {

std::string requireEnv(const char* name) {
  const char* value = std::getenv(name);
  C10D_CHECK(value != nullptr && *value != '\0', InvalidArgument, "environment variable ", name,
             " is not set; launch with c10drun, torchrun or mpirun, or set RANK, WORLD_SIZE, "
             "MASTER_ADDR and MASTER_PORT yourself");
  return value;
}

int64_t parseInt(const char* name, const std::string& text, int64_t low, int64_t high) {
  int64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  C10D_CHECK(ec == std::errc() && end == text.data() + text.size() && value >= low && value <= high,
             InvalidArgument, "environment variable ", name, "='", text, "' is not an integer in [",
             low, ", ", high, "]");
  return value;
}

}  // namespace

RendezvousInfo rendezvousFromEnv() {
  RendezvousInfo info;
  info.worldSize = static_cast<int>(parseInt("WORLD_SIZE", requireEnv("WORLD_SIZE"), 1, INT32_MAX));
  info.rank = static_cast<int>(parseInt("RANK", requireEnv("RANK"), 0, info.worldSize - 1));
  const char* localRank = std::getenv("LOCAL_RANK");
  if (localRank != nullptr && *localRank != '\0') {
    info.localRank = static_cast<int>(parseInt("LOCAL_RANK", localRank, 0, INT32_MAX));
  }
  info.masterAddr = requireEnv("MASTER_ADDR");
  info.masterPort =
      static_cast<uint16_t>(parseInt("MASTER_PORT", requireEnv("MASTER_PORT"), 1, 65535));
  return info;
}

std::shared_ptr<Store> connectStore(const RendezvousInfo& info, std::chrono::milliseconds timeout) {
  TCPStoreOptions options;
  options.isServer = info.rank == 0;
  options.numWorkers = info.worldSize;
  options.timeout = timeout;
  return std::make_shared<TCPStore>(info.masterAddr, info.masterPort, options);
}

}  // namespace c10d
