#pragma once

// Private to backends/gloo (and the benchmark's raw-Gloo path, which must connect exactly as the
// backend does): how a Gloo context meets its peers through our Store, and which local address
// it offers them; how elements of any dtype are handed to Gloo.

#include <arpa/inet.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "c10d/Exception.hpp"
#include "c10d/backends/common/Flatten.hpp"
#include "c10d/store/PrefixStore.hpp"
#include "c10d/store/TCPStore.hpp"

namespace c10d {

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

// The TCPStore under any PrefixStores, or null (FileStore, HashStore: one host).
inline const TCPStore* findTCPStore(const c10d::Store* store) {
  while (store != nullptr) {
    if (auto* tcp = dynamic_cast<const TCPStore*>(store)) return tcp;
    auto* prefix = dynamic_cast<const PrefixStore*>(store);
    store = prefix != nullptr ? prefix->underlying().get() : nullptr;
  }
  return nullptr;
}

inline bool isLoopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

// The local address the kernel would use to reach host: an address peers that can reach the
// store's host can reach us on, without guessing from the hostname.
inline std::string localAddressToward(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* results = nullptr;
  if (getaddrinfo(host.c_str(), "9", &hints, &results) != 0) return "";
  std::string address;
  for (addrinfo* ai = results; ai != nullptr && address.empty(); ai = ai->ai_next) {
    int fd = ::socket(ai->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0) continue;
    sockaddr_storage local{};
    socklen_t length = sizeof(local);
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0 &&
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
      char text[INET6_ADDRSTRLEN] = {0};
      const void* raw =
          local.ss_family == AF_INET6
              ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
              : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
      if (inet_ntop(local.ss_family, raw, text, sizeof(text)) != nullptr) address = text;
    }
    ::close(fd);
  }
  freeaddrinfo(results);
  return address;
}

inline gloo::transport::tcp::attr deviceAttributes(const c10d::Store& store) {
  gloo::transport::tcp::attr attr;
  for (const char* variable : {"C10D_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME"}) {
    const char* iface = std::getenv(variable);
    if (iface != nullptr && *iface != '\0') {
      attr.iface = iface;
      return attr;
    }
  }
  const TCPStore* tcp = findTCPStore(&store);
  if (tcp == nullptr || isLoopback(tcp->host())) {
    attr.hostname = "127.0.0.1";
    return attr;
  }
  attr.hostname = localAddressToward(tcp->host());
  C10D_CHECK(!attr.hostname.empty(), BackendError,
             "gloo: no local address routes to the store "
             "host '",
             tcp->host(), "'; set C10D_SOCKET_IFNAME to the interface to use");
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

}  // namespace c10d
