// The bootstrap every job starts with: ranks find each other through the TCPStore that rank 0
// hosts, publish who they are, read everyone else's entry, agree on a counter and pass a
// barrier. Run it with `c10drun --nproc-per-node 4 store_rendezvous`.
//
// Exits 0 only when every check below passed on this rank.

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "c10d/Init.hpp"
#include "c10d/core/Exception.hpp"
#include "store/PrefixStore.hpp"

int main() {
  try {
    c10d::InitOptions options;
    options.timeout = std::chrono::seconds(60);
    c10d::WorldInfo info = c10d::detectWorld(options);
    auto store = std::make_shared<c10d::PrefixStore>("example", c10d::connectStore(options, info));
    const int rank = info.rank;
    const int world = info.worldSize;

    char host[256] = {0};
    gethostname(host, sizeof(host) - 1);
    std::string self = std::string(host) + ":" + std::to_string(getpid());
    store->setString("peer/" + std::to_string(rank), self);

    std::vector<std::string> keys;
    for (int r = 0; r < world; ++r) keys.push_back("peer/" + std::to_string(r));
    std::vector<c10d::Store::Bytes> peers = store->multiGet(keys);
    std::set<std::string> distinct;
    for (const auto& peer : peers) distinct.insert(c10d::toString(peer));
    if (c10d::toString(peers[rank]) != self || distinct.size() != static_cast<size_t>(world) ||
        distinct.count("") != 0) {
      std::fprintf(stderr, "rank %d: expected %d distinct peer entries including mine, got %zu\n",
                   rank, world, distinct.size());
      return 1;
    }

    // Every rank adds rank + 1; after the barrier all must read world * (world + 1) / 2.
    store->add("sum", rank + 1);
    if (store->add("arrived", 1) == world) store->setString("all-arrived", "1");
    store->wait({"all-arrived"});
    int64_t sum = store->add("sum", 0);
    int64_t expected = static_cast<int64_t>(world) * (world + 1) / 2;
    if (sum != expected) {
      std::fprintf(stderr, "rank %d: counter is %lld, expected %lld\n", rank,
                   static_cast<long long>(sum), static_cast<long long>(expected));
      return 1;
    }

    std::printf("rank %d of %d: found all %d peers, counter %lld == %lld, barrier passed\n", rank,
                world, world, static_cast<long long>(sum), static_cast<long long>(expected));
    // Rank 0 hosts the store: it leaves last so no one loses the server mid-call.
    if (store->add("done", 1) == world) store->setString("all-done", "1");
    if (rank == 0) store->wait({"all-done"});
    return 0;
  } catch (const c10d::Error& e) {
    std::fprintf(stderr, "store_rendezvous: %s\n", e.what());
    return 1;
  }
}
