#pragma once

// Which local address a process offers its peers (Gloo, RPC): the one the kernel would use to
// reach the store's host, so that whoever can reach the store can reach us, without guessing from
// the hostname. Private to c10d's libraries; knows no store (tcpStoreHost in store/TCPStore.hpp
// finds the host).

#include <optional>
#include <string>

#include "c10d/core/Config.hpp"

namespace c10d::inline v1 {

bool isLoopback(const std::string& host);

// The local address the kernel would use to reach host ("" when it cannot be resolved).
std::string localAddressToward(const std::string& host);

// The network interface the user chose for c10d's sockets: C10D_SOCKET_IFNAME (a group's
// settings, else the environment), else GLOO_SOCKET_IFNAME; "" when none is set.
std::string socketInterface(const config::Settings& settings = {});

// The first IPv4 (else IPv6) address of network interface name ("" when it has none).
std::string interfaceAddress(const std::string& name);

// The local address toward storeHost: 127.0.0.1 with no store host or a loopback one. Throws
// InvalidArgument naming what when no local address routes there.
std::string addressTowardStore(const std::optional<std::string>& storeHost,
                               const std::string& what);

// The address to listen on and publish: the address of C10D_SOCKET_IFNAME (or
// GLOO_SOCKET_IFNAME) when set, else the local address toward storeHost, else (no store host:
// a store on this host only; or a loopback store host) 127.0.0.1. Throws InvalidArgument naming
// what for an interface without an address, and for a store host no local address routes to.
std::string advertisedAddress(const std::optional<std::string>& storeHost, const std::string& what,
                              const config::Settings& settings = {});

}  // namespace c10d::inline v1
