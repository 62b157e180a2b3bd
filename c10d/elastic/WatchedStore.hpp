#pragma once

// The store of one generation's group (private to c10d::elastic): a PrefixStore whose blocking
// calls wait in short slices and, between slices, ask whether a member of the generation has
// died. A member lost while the group is being built (Gloo's rendezvous waits for its address,
// NCCL's for its unique id) or while it heals (the State's values) then ends the wait within a
// slice, with StateError naming it, instead of at the group's timeout.
//
// Threading: as PrefixStore; lost is called from whichever thread waits.

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "store/PrefixStore.hpp"

namespace c10d::inline v1::elastic {

class WatchedStore : public PrefixStore {
 public:
  // lost: empty while every member lives, else who died (for the error).
  WatchedStore(std::string prefix, std::shared_ptr<Store> store, std::function<std::string()> lost);

  using Store::get;
  using Store::multiGet;
  using Store::wait;
  Bytes get(const std::string& key, std::chrono::milliseconds timeout) override;
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  std::vector<Bytes> multiGet(const std::vector<std::string>& keys,
                              std::chrono::milliseconds timeout) override;

 private:
  // Runs wait(slice) until it returns or timeout has passed, looking for a death between slices.
  template <typename Wait>
  auto watched(const std::vector<std::string>& keys, std::chrono::milliseconds timeout, Wait wait);

  std::function<std::string()> lost_;
};

}  // namespace c10d::inline v1::elastic
