#include "c10d/elastic/WatchedStore.hpp"

#include <algorithm>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1::elastic {
namespace {

// How long one slice of a wait lasts. A death is seen within this plus one store round trip per
// member; a wait that ends in time costs nothing extra (the store answers as the key appears),
// and one that lasts costs a round trip per member per slice (measured:
// docs/performance-history.md, "Figures that lived in code comments").
constexpr auto kSlice = std::chrono::milliseconds(50);

std::string keyList(const std::vector<std::string>& keys) {
  std::string text;
  for (const auto& key : keys) text += (text.empty() ? "'" : ", '") + key + "'";
  return text;
}

}  // namespace

WatchedStore::WatchedStore(std::string prefix, std::shared_ptr<Store> store,
                           std::function<std::string()> lost)
    : PrefixStore(std::move(prefix), std::move(store)), lost_(std::move(lost)) {}

template <typename Wait>
auto WatchedStore::watched(const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
                           Wait wait) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline = Clock::now() + timeout;
  while (true) {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    try {
      return wait(std::clamp(left, std::chrono::milliseconds(1), kSlice));
    } catch (const TimeoutError& e) {
      if (Clock::now() >= deadline) {
        C10D_THROW(TimeoutError, "store prefix '", prefix(), "': key(s) ", keyList(keys),
                   " not set within ", timeout.count(), " ms (", e.what(), ")");
      }
    }
    if (std::string who = lost_(); !who.empty()) {
      C10D_THROW(StateError, "elastic: ", who, " while this rank waited for key(s) ", keyList(keys),
                 " under store prefix '", prefix(), "'");
    }
  }
}

WatchedStore::Bytes WatchedStore::get(const std::string& key, std::chrono::milliseconds timeout) {
  return watched({key}, timeout,
                 [&](std::chrono::milliseconds slice) { return PrefixStore::get(key, slice); });
}

void WatchedStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  watched(keys, timeout, [&](std::chrono::milliseconds slice) { PrefixStore::wait(keys, slice); });
}

std::vector<WatchedStore::Bytes> WatchedStore::multiGet(const std::vector<std::string>& keys,
                                                        std::chrono::milliseconds timeout) {
  return watched(keys, timeout, [&](std::chrono::milliseconds slice) {
    return PrefixStore::multiGet(keys, slice);
  });
}

}  // namespace c10d::inline v1::elastic
