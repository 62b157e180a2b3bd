#pragma once

// Private to backends/gloo (and the benchmark's raw-Gloo path, which must connect exactly as the
// backend does): how a Gloo context meets its peers through our Store, and which local address
// it offers them; how elements of any dtype are handed to Gloo.

#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/address.h>
#include <gloo/transport/tcp/device.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/common/Flatten.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/net/LocalAddress.hpp"
#include "store/TCPStore.hpp"

namespace c10d::inline v1 {

// Gloo's rendezvous talks to our store through this. Gloo calls get() on keys that may not exist
// yet, so get() must wait, within the group's timeout.
//
// Gloo's full-mesh connect sets this rank's keys ("rank_<rank>", its host's name, and "<rank>",
// every pair's address), then gets the host name of each lower rank and waits for and gets each
// peer's addresses: about three requests per peer. Given the group's rank and size, the first
// read of one of those keys fetches all of its kind in one multiGet instead, and later reads are
// answered from what it fetched: a context connects in four requests, whatever the group's size.
class GlooStore : public gloo::rendezvous::Store {
 public:
  GlooStore(std::shared_ptr<c10d::Store> store, std::chrono::milliseconds timeout, int rank = -1,
            int size = 0)
      : store_(std::move(store)), timeout_(timeout), rank_(rank), size_(size) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, c10d::Store::Bytes(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    if (const c10d::Store::Bytes* fetched = fetch(key, timeout_)) {
      return std::vector<char>(fetched->begin(), fetched->end());
    }
    c10d::Store::Bytes value = store_->get(key, timeout_);
    return std::vector<char>(value.begin(), value.end());
  }
  // Each peer's value of "<rank>" (its pairs' addresses), by rank with this rank's left out;
  // null until a read fetched them.
  const std::vector<c10d::Store::Bytes>* peerAddresses() const {
    return kinds_[0].values.empty() ? nullptr : &kinds_[0].values;
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    const std::chrono::milliseconds within = timeout.count() > 0 ? timeout : timeout_;
    std::vector<std::string> others;
    for (const std::string& key : keys) {
      if (fetch(key, within) == nullptr) others.push_back(key);
    }
    if (!others.empty()) store_->wait(others, within);
  }

 private:
  // Keys "<prefix><rank>" of the ranks in [first, last), this rank's left out, fetched at once.
  struct Kind {
    const char* prefix;
    int first, last;
    std::vector<c10d::Store::Bytes> values;  // empty until fetched
  };

  // A peer's key of a known kind, fetched with the others of its kind on first use; null for
  // other keys (and without the group's rank and size).
  const c10d::Store::Bytes* fetch(const std::string& key, std::chrono::milliseconds timeout) {
    if (size_ <= 1) return nullptr;
    for (Kind& kind : kinds_) {
      const size_t prefix = std::char_traits<char>::length(kind.prefix);
      if (key.size() <= prefix || key.size() > prefix + 9 || key.compare(0, prefix, kind.prefix) ||
          key.find_first_not_of("0123456789", prefix) != std::string::npos) {
        continue;
      }
      const int peer = std::stoi(key.substr(prefix));
      if (peer < kind.first || peer >= kind.last || peer == rank_ ||
          std::to_string(peer) != key.substr(prefix)) {
        return nullptr;
      }
      if (kind.values.empty()) {
        std::vector<std::string> keys;
        for (int r = kind.first; r < kind.last; ++r) {
          if (r != rank_) keys.push_back(kind.prefix + std::to_string(r));
        }
        kind.values = store_->multiGet(keys, timeout);
      }
      const int index = peer - kind.first;
      return &kind.values[rank_ >= kind.first && peer > rank_ ? index - 1 : index];
    }
    return nullptr;
  }

  std::shared_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
  int rank_;
  int size_;
  // Addresses: every peer's. Host names: the lower ranks' (Gloo counts the ranks before this
  // one on its host).
  Kind kinds_[2] = {{"", 0, size_, {}}, {"rank_", 0, rank_, {}}};
};

// A Gloo context connected as a full mesh through a GlooStore, which then knows, for each peer,
// the listening address of the peer's pair toward this rank (Gloo names a peer by the address
// it connected to in its errors, "[10.0.0.2]:41235").
class GlooContext : public gloo::rendezvous::Context {
 public:
  using gloo::rendezvous::Context::Context;

  void connect(GlooStore& store, std::shared_ptr<gloo::transport::Device>& device) {
    connectFullMesh(store, device);
    const std::vector<c10d::Store::Bytes>* all = store.peerAddresses();
    towardThisRank_.assign(size, std::string());
    for (int peer = 0; peer < size && all != nullptr; ++peer) {
      if (peer == rank) continue;
      const c10d::Store::Bytes& bytes = (*all)[peer < rank ? peer : peer - 1];
      std::vector<char> list(bytes.begin(), bytes.end());
      const std::string address = gloo::transport::tcp::Address(extractAddress(list, peer)).str();
      towardThisRank_[peer] = address.substr(0, address.find('$'));
    }
  }
  // The listening address of this rank's pair toward peer, and of peer's toward this rank
  // (without Gloo's "$<sequence number>"); "" for this rank.
  std::string ownAddress(int peer) {
    if (peer == rank) return "";
    const std::string address = getPair(peer)->address().str();
    return address.substr(0, address.find('$'));
  }
  const std::string& peerAddress(int peer) const { return towardThisRank_[peer]; }

 private:
  std::vector<std::string> towardThisRank_;
};

inline gloo::transport::tcp::attr deviceAttributes(const c10d::Store& store,
                                                   const config::Settings& settings) {
  gloo::transport::tcp::attr attr;
  attr.iface = socketInterface(settings);
  if (!attr.iface.empty()) return attr;
  // An interface named by the user goes to Gloo as a name; otherwise the address the store's
  // host is reached from.
  attr.hostname = addressTowardStore(tcpStoreHost(store), "gloo");
  return attr;
}

// Gloo's templated setters only use sizeof(T); moving elements as opaque words of the right size
// lets one instantiation serve every dtype of that size (reduce functions know the real type).
template <size_t N>
struct alignas(N) Word {
  uint8_t bytes[N];
};

template <typename Fn>
void withWordOfSize(size_t elementSize, Fn&& fn) {
  switch (elementSize) {
    case 1:
      return fn.template operator()<Word<1>>();
    case 2:
      return fn.template operator()<Word<2>>();
    case 4:
      return fn.template operator()<Word<4>>();
    case 8:
      return fn.template operator()<Word<8>>();
  }
  C10D_THROW(InvalidArgument, "gloo backend: unsupported element size ", elementSize);
}

}  // namespace c10d::inline v1
