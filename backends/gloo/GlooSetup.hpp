#pragma once

// Private to backends/gloo (and the benchmark's raw-Gloo path, which must connect exactly as the
// backend does): how a Gloo context meets its peers through our Store, and which local address
// it offers them; how elements of any dtype are handed to Gloo.

#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <memory>
#include <string>
#include <vector>

#include "backends/common/Flatten.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/net/LocalAddress.hpp"
#include "store/TCPStore.hpp"

namespace c10d::inline v0 {

// Gloo's rendezvous talks to our store through this. Gloo calls get() on keys that may not exist
// yet, so get() must wait, within the group's timeout.
class GlooStore : public gloo::rendezvous::Store {
 public:
  GlooStore(std::shared_ptr<c10d::Store> store, std::chrono::milliseconds timeout)
      : store_(std::move(store)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    store_->set(key, c10d::Store::Bytes(data.begin(), data.end()));
  }
  std::vector<char> get(const std::string& key) override {
    c10d::Store::Bytes value = store_->get(key, timeout_);
    return std::vector<char>(value.begin(), value.end());
  }
  void wait(const std::vector<std::string>& keys) override { store_->wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    store_->wait(keys, timeout.count() > 0 ? timeout : timeout_);
  }

 private:
  std::shared_ptr<c10d::Store> store_;
  std::chrono::milliseconds timeout_;
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

}  // namespace c10d::inline v0
