#include "rpc/transport/Transport.hpp"

#include <netdb.h>
#include <sys/socket.h>
#include <uv.h>

#include <chrono>
#include <cstring>
#include <exception>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#include "c10d/core/Exception.hpp"
#include "c10d/core/Logging.hpp"
#include "c10d/net/UvLoop.hpp"
#include "rpc/transport/TransportImpl.hpp"

namespace c10d::inline v1::rpc {

namespace {

using c10d::detail::uvError;
using detail::ConnectResult;

std::pair<std::string, std::string> splitAddress(const std::string& address) {
  size_t colon = address.rfind(':');
  C10D_CHECK(colon != std::string::npos && colon > 0, InvalidArgument, "rpc: bad address '",
             address, "'");
  std::string host = address.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  return {host, address.substr(colon + 1)};
}

}  // namespace

Transport::Impl::Connection* Transport::Impl::newConnection() {
  auto owned = std::make_shared<Connection>();
  Connection* c = owned.get();
  c->self = std::move(owned);
  c->impl = this;
  uv_tcp_init(loopThread.loop(), &c->handle);
  uv_tcp_nodelay(&c->handle, 1);
  c->handle.data = c;
  connections.insert(c);
  return c;
}

void Transport::Impl::registerPeer(Connection* c, int peer) {
  c->peer = peer;
  uv_os_fd_t fd = -1;
  uv_fileno(reinterpret_cast<uv_handle_t*>(&c->handle), &fd);
  {
    std::lock_guard<std::mutex> guard(c->writeMutex);
    c->fd = fd;
  }
  std::lock_guard<std::mutex> guard(mutex);
  peers[peer] = c->self;
  lost.erase(peer);
  changed.notify_all();
}

void Transport::Impl::drop(Connection* c, const std::string& why) {
  std::map<uint64_t, detail::Loan> loans;  // ended (sealed off) outside the lock
  {
    std::lock_guard<std::mutex> guard(c->writeMutex);
    if (c->closing) return;
    c->closing = true;
    c->closingWhy = why;
    loans.swap(c->loans);
  }
  if (auto pending = std::exchange(c->pendingConnect, nullptr)) {
    pending->set_value(ConnectResult{UV_ECONNRESET, {}});
  }
  if (c->stage == Connection::Stage::AwaitProof) {
    C10D_LOG(Warning, "rpc worker ", self, ": refused a connection claiming to be worker ",
             c->claimed, ": it left without authenticating (", why,
             "); does it have C10D_AUTH_TOKEN set?");
  }
  int peer = c->peer;
  bool report = false;
  if (peer >= 0) {
    std::lock_guard<std::mutex> guard(mutex);
    auto it = peers.find(peer);
    if (it != peers.end() && it->second.get() == c) {
      peers.erase(it);
      lost[peer] = why;
      report = !closed;
    }
    changed.notify_all();
  }
  uv_close(reinterpret_cast<uv_handle_t*>(&c->handle), [](uv_handle_t* handle) {
    auto* c = static_cast<Connection*>(handle->data);
    c->impl->connections.erase(c);
    c->self.reset();  // deletes c unless a sender still holds it
  });
  if (report) onPeerLost(peer, why);
}

void Transport::Impl::scheduleFlush(const std::shared_ptr<Connection>& c) {
  {
    std::lock_guard<std::mutex> guard(mutex);
    if (loopBusy) {
      dirty.push_back(c);
      return;
    }
  }
  post([this, c] { flush(c.get()); });
}

void Transport::Impl::flushDirty() {
  std::vector<std::shared_ptr<Connection>> ready;
  {
    std::lock_guard<std::mutex> guard(mutex);
    loopBusy = false;
    loopMarkedBusy = false;
    ready.swap(dirty);
  }
  for (const auto& c : ready) flush(c.get());
}

Transport::Transport(int self, int worldSize, std::optional<std::string> token, bool sharedMemory,
                     OnFrame onFrame, OnPeerLost onPeerLost)
    : impl_(std::make_shared<Impl>(self, worldSize, std::move(token), sharedMemory,
                                   std::move(onFrame), std::move(onPeerLost))) {
  Impl& impl = *impl_;
  uv_check_init(impl.loopThread.loop(), &impl.afterCallbacks);
  impl.afterCallbacks.data = &impl;
  uv_check_start(&impl.afterCallbacks,
                 [](uv_check_t* check) { static_cast<Impl*>(check->data)->flushDirty(); });
  impl.loopThread.start();
}

Transport::~Transport() {
  close();
}

std::string Transport::listen(const std::string& host) {
  return impl_->onLoop([this, host]() -> std::string {
    Impl& impl = *impl_;
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* found = nullptr;
    int rc = getaddrinfo(host.c_str(), "0", &hints, &found);
    C10D_CHECK(rc == 0 && found != nullptr, InvalidArgument, "rpc: cannot resolve '", host,
               "': ", gai_strerror(rc));
    uv_tcp_init(impl.loopThread.loop(), &impl.listener);
    impl.listener.data = &impl;
    rc = uv_tcp_bind(&impl.listener, found->ai_addr, 0);
    freeaddrinfo(found);
    if (rc == 0) {
      rc = uv_listen(reinterpret_cast<uv_stream_t*>(&impl.listener), 128,
                     [](uv_stream_t* server, int status) {
                       auto* impl = static_cast<Impl*>(server->data);
                       if (status < 0) return;
                       Impl::Connection* c = impl->newConnection();
                       if (uv_accept(server, reinterpret_cast<uv_stream_t*>(&c->handle)) != 0) {
                         impl->drop(c, "accept failed");
                         return;
                       }
                       impl->startReading(c);
                     });
    }
    impl.listening = true;
    C10D_CHECK(rc == 0, BackendError, "rpc: cannot listen on ", host, ": ", uvError(rc));
    sockaddr_storage bound{};
    int length = sizeof(bound);
    uv_tcp_getsockname(&impl.listener, reinterpret_cast<sockaddr*>(&bound), &length);
    char text[INET6_ADDRSTRLEN] = {};
    int port = 0;
    if (bound.ss_family == AF_INET6) {
      auto* a = reinterpret_cast<sockaddr_in6*>(&bound);
      uv_ip6_name(a, text, sizeof(text));
      port = ntohs(a->sin6_port);
      return "[" + std::string(text) + "]:" + std::to_string(port);
    }
    auto* a = reinterpret_cast<sockaddr_in*>(&bound);
    uv_ip4_name(a, text, sizeof(text));
    port = ntohs(a->sin_port);
    return std::string(text) + ":" + std::to_string(port);
  });
}

void Transport::connect(int peer, const std::string& address,
                        std::chrono::steady_clock::time_point deadline) {
  auto [host, port] = splitAddress(address);
  std::string lastError;
  while (true) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found);
    if (rc == 0 && found != nullptr) {
      sockaddr_storage target{};
      std::memcpy(&target, found->ai_addr, found->ai_addrlen);
      freeaddrinfo(found);
      auto result = std::make_shared<std::promise<ConnectResult>>();
      std::future<ConnectResult> done = result->get_future();
      impl_->post([impl = impl_.get(), target, result, peer] {
        Impl::Connection* c = impl->newConnection();
        struct Connect {
          uv_connect_t request;
          Impl::Connection* connection;
          std::shared_ptr<std::promise<ConnectResult>> result;
          int peer;
        };
        auto* request = new Connect{{}, c, result, peer};
        int rc = uv_tcp_connect(&request->request, &c->handle,
                                reinterpret_cast<const sockaddr*>(&target),
                                [](uv_connect_t* r, int status) {
                                  auto* request = reinterpret_cast<Connect*>(r);
                                  Impl::Connection* c = request->connection;
                                  if (status == 0) {
                                    c->impl->introduce(c, request->peer, request->result);
                                    c->impl->startReading(c);
                                  } else {
                                    c->impl->drop(c, "connect failed");
                                    request->result->set_value(ConnectResult{status, {}});
                                  }
                                  delete request;
                                });
        if (rc != 0) {
          impl->drop(c, "connect failed");
          result->set_value(ConnectResult{rc, {}});
          delete request;
        }
      });
      ConnectResult outcome = done.get();
      C10D_CHECK(outcome.refused.empty(), RemoteError, "rpc worker ", impl_->self,
                 ": connecting to worker ", peer, " at ", address, ": ", outcome.refused);
      rc = outcome.rc;
      if (rc == 0) return;
      lastError = uvError(rc);
    } else {
      lastError = gai_strerror(rc);
    }
    C10D_CHECK(std::chrono::steady_clock::now() < deadline, TimeoutError, "rpc worker ",
               impl_->self, ": could not connect to worker ", peer, " at ", address, ": ",
               lastError);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

void Transport::waitForPeers(std::chrono::steady_clock::time_point deadline) {
  const int worldSize = impl_->worldSize;
  std::unique_lock<std::mutex> lock(impl_->mutex);
  auto allUp = [&] { return static_cast<int>(impl_->peers.size()) >= worldSize - 1; };
  if (!impl_->changed.wait_until(lock, deadline, allUp)) {
    std::string missing;
    for (int p = 0; p < worldSize; ++p) {
      if (p != impl_->self && impl_->peers.count(p) == 0) {
        missing += (missing.empty() ? "" : ", ") + std::to_string(p);
      }
    }
    C10D_THROW(TimeoutError, "rpc worker ", impl_->self, ": no connection from worker(s) ", missing,
               " before the timeout");
  }
}

std::map<int, std::string> Transport::lostPeers() const {
  std::lock_guard<std::mutex> guard(impl_->mutex);
  return impl_->lost;
}

void Transport::send(int peer, Frame frame, bool moreSoon) {
  std::shared_ptr<Impl::Connection> c;
  {
    std::lock_guard<std::mutex> guard(impl_->mutex);
    C10D_CHECK(!impl_->closed, StateError, "rpc transport of worker ", impl_->self, " is closed");
    if (auto gone = impl_->lost.find(peer); gone != impl_->lost.end()) {
      throw PeerLostError(peer, gone->second);
    }
    auto it = impl_->peers.find(peer);
    C10D_CHECK(it != impl_->peers.end(), InvalidArgument, "rpc: no connection to worker ", peer);
    c = it->second;
  }
  impl_->writeOrQueue(c, peer, std::move(frame), moreSoon);
}

void Transport::close() {
  Impl& impl = *impl_;
  impl.stopCopier();  // before the loop: what it posts then is refused, and dropped
  try {
    // Two threads may close at once (shutdown and a destructor): loopThread lets one close and
    // join; the other returns once it has. The commands posted before run first.
    impl.loopThread.stop([&impl] {
      {
        std::lock_guard<std::mutex> guard(impl.mutex);
        impl.closed = true;
      }
      // Frames still queued on a connection go with it.
      std::vector<Impl::Connection*> all(impl.connections.begin(), impl.connections.end());
      for (auto* c : all) impl.drop(c, "the transport was closed");
      if (impl.listening) uv_close(reinterpret_cast<uv_handle_t*>(&impl.listener), nullptr);
      uv_close(reinterpret_cast<uv_handle_t*>(&impl.afterCallbacks), nullptr);
    });
  } catch (const std::exception& e) {
    C10D_LOG(Warning, "rpc worker ", impl.self, ": closing the transport: ", e.what());
  }
}

}  // namespace c10d::inline v1::rpc
