#include "c10d/net/LocalAddress.hpp"

#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {

namespace {

std::string addressText(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = {0};
  const void* raw =
      address->sa_family == AF_INET6
          ? static_cast<const void*>(&reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr)
          : static_cast<const void*>(&reinterpret_cast<const sockaddr_in*>(address)->sin_addr);
  return inet_ntop(address->sa_family, raw, text, sizeof(text)) != nullptr ? text : "";
}

}  // namespace

bool isLoopback(const std::string& host) {
  return host == "localhost" || host.rfind("127.", 0) == 0 || host == "::1";
}

std::string localAddressToward(const std::string& host) {
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
      address = addressText(reinterpret_cast<const sockaddr*>(&local));
    }
    ::close(fd);
  }
  freeaddrinfo(results);
  return address;
}

std::string socketInterface(const config::Settings& settings) {
  return settings.value("C10D_SOCKET_IFNAME");
}

std::string interfaceAddress(const std::string& name) {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return "";
  std::string v4;
  std::string v6;
  for (ifaddrs* entry = all; entry != nullptr; entry = entry->ifa_next) {
    if (entry->ifa_addr == nullptr || name != entry->ifa_name) continue;
    if (entry->ifa_addr->sa_family == AF_INET && v4.empty()) v4 = addressText(entry->ifa_addr);
    if (entry->ifa_addr->sa_family == AF_INET6 && v6.empty()) v6 = addressText(entry->ifa_addr);
  }
  freeifaddrs(all);
  return v4.empty() ? v6 : v4;
}

std::string advertisedAddress(const std::optional<std::string>& storeHost, const std::string& what,
                              const config::Settings& settings) {
  std::string iface = socketInterface(settings);
  if (!iface.empty()) {
    std::string address = interfaceAddress(iface);
    C10D_CHECK(!address.empty(), InvalidArgument, what, ": C10D_SOCKET_IFNAME='", iface, "' (",
               settings.origin("C10D_SOCKET_IFNAME"),
               ") names no interface with an address on this host");
    return address;
  }
  return addressTowardStore(storeHost, what);
}

std::string addressTowardStore(const std::optional<std::string>& storeHost,
                               const std::string& what) {
  if (!storeHost || isLoopback(*storeHost)) return "127.0.0.1";
  std::string address = localAddressToward(*storeHost);
  C10D_CHECK(!address.empty(), InvalidArgument, what,
             ": no local address routes to the store host '", *storeHost,
             "'; set C10D_SOCKET_IFNAME to the interface to use");
  return address;
}

}  // namespace c10d::inline v1
