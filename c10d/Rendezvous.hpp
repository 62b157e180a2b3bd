#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "c10d/store/Store.hpp"

namespace c10d {

// Where this process sits in the job, as PyTorch's env:// init method reads it.
struct RendezvousInfo {
  int rank = 0;
  int worldSize = 1;
  int localRank = 0;
  std::string masterAddr;
  uint16_t masterPort = 0;
};

// Reads RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT (required) and LOCAL_RANK (default 0), the
// variables c10drun, torchrun and cluster operators set. Throws InvalidArgument naming the
// missing or malformed variable and its value.
RendezvousInfo rendezvousFromEnv();

// Connects to the job's TCPStore at MASTER_ADDR:MASTER_PORT; rank 0 hosts it. Returns once all
// worldSize ranks have connected (rank 0 waits for them), or throws TimeoutError.
std::shared_ptr<Store> connectStore(const RendezvousInfo& info, std::chrono::milliseconds timeout);

}  // namespace c10d
