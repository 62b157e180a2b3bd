#include "backends/gloo/transport/SyncMesh.hpp"

#include <arpa/inet.h>
#include <gloo/common/error.h>
#include <gloo/transport/pair.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <map>
#include <sstream>
#include <thread>

#include "backends/common/Flatten.hpp"
#include "c10d/core/Cores.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Signals.hpp"
#include "store/Store.hpp"

namespace c10d::inline v1 {

namespace {

// A socket address as Gloo's tcp::Address::str() prints it ("[10.0.0.2]:<port>", the port as
// the bytes of sockaddr's field read as a number), or "" for none.
std::string glooText(const sockaddr_storage& address) {
  char text[INET6_ADDRSTRLEN + 2] = {};
  int port = 0;
  if (address.ss_family == AF_INET) {
    const auto* in = reinterpret_cast<const sockaddr_in*>(&address);
    inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text));
    port = in->sin_port;
  } else if (address.ss_family == AF_INET6) {
    const auto* in6 = reinterpret_cast<const sockaddr_in6*>(&address);
    inet_ntop(AF_INET6, &in6->sin6_addr, text, sizeof(text));
    port = in6->sin6_port;
  } else {
    return "";
  }
  return detail::concat("[", text, "]:", port);
}

std::string withoutSequence(const std::string& address) {
  return address.substr(0, address.find('$'));
}

}  // namespace

void SyncMesh::findSockets(const std::vector<std::string>& peerAddresses) {
  // Each connection by the address at one end.
  std::map<std::string, int> byAddress;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_ || peers_[peer].shared) continue;
    byAddress[withoutSequence(context_->getPair(peer)->address().str())] = peer;
    if (static_cast<size_t>(peer) < peerAddresses.size() && !peerAddresses[peer].empty()) {
      byAddress[withoutSequence(peerAddresses[peer])] = peer;
    }
  }
  std::error_code error;
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd", error)) {
    int fd = -1;
    try {
      fd = std::stoi(entry.path().filename().string());
    } catch (const std::exception&) {
      continue;
    }
    sockaddr_storage local{}, remote{};
    socklen_t localBytes = sizeof(local), remoteBytes = sizeof(remote);
    // Listening sockets have no peer: only connected ones are a pair's.
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &localBytes) != 0 ||
        ::getpeername(fd, reinterpret_cast<sockaddr*>(&remote), &remoteBytes) != 0) {
      continue;
    }
    for (const std::string& end : {glooText(local), glooText(remote)}) {
      auto found = byAddress.find(end);
      if (found != byAddress.end() && !peers_[found->second].shared) {
        peers_[found->second].fd = fd;
      }
    }
  }
}

SyncMesh::SyncMesh(int rank, int size, std::chrono::milliseconds groupTimeout,
                   std::chrono::nanoseconds spinFor)
    : groupTimeout_(groupTimeout), rank_(rank), size_(size), peers_(size_), spin_(spinFor) {
  timeout_ = groupTimeout_;  // set-up's messages: the group's
}

void SyncMesh::attachSockets(std::shared_ptr<gloo::rendezvous::Context> context,
                             const std::vector<std::string>& peerAddresses) {
  context_ = std::move(context);
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_ || peers_[peer].shared) continue;
    auto& pair = context_->getPair(peer);
    // Gloo's own busy poll never sleeps: only when told to spin forever. Otherwise its reads
    // block, after awaitReadable's spin for the first byte.
    pair->setSync(true, spin_.budget() == shm::kSpinForever);
    Peer& p = peers_[peer];
    p.sendStage.resize(kHeaderBytes + kStageBytes);
    p.recvStage.resize(kHeaderBytes + kStageBytes);
    // One slot per pair: this context carries nothing else, and a pair delivers in order.
    p.sendBuffer = pair->createSendBuffer(0, p.sendStage.data(), p.sendStage.size());
    p.recvBuffer = pair->createRecvBuffer(0, p.recvStage.data(), p.recvStage.size());
    scratch_.resize(kStageBytes);
  }
  findSockets(peerAddresses);
  // Size every socket's send buffer now (see kStageBytes). The lower rank of a pair sends first,
  // so no two blocking writes ever wait on each other.
  // Before it, empty messages each way: the lower rank of its first TCP pair times them and the
  // large message to measure the link (measuredLink; every rank's first pair is with the lowest
  // rank it has on TCP, so rank 0's first exchange runs alone on its link). The first empty
  // exchange waits for the peer to get here and is not timed.
  using Clock = std::chrono::steady_clock;
  constexpr int kEchoes = 3;
  bool measured = false;
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_ || peers_[peer].shared) continue;
    if (rank_ < peer) {
      send(peer, nullptr, 0);
      recv(peer, nullptr, 0);
      double roundTrip = 1e300;
      for (int i = 0; i < kEchoes; ++i) {
        const auto start = Clock::now();
        send(peer, nullptr, 0);
        recv(peer, nullptr, 0);
        roundTrip = std::min(
            roundTrip, std::chrono::duration<double, std::micro>(Clock::now() - start).count());
      }
      const auto start = Clock::now();
      send(peer, scratch_.data(), kStageBytes);
      recv(peer, scratch_.data(), kStageBytes);
      const double both = std::chrono::duration<double, std::micro>(Clock::now() - start).count();
      if (!measured) {
        measured = true;
        // The peer sends its message once ours has arrived: two messages one after the other.
        measuredLink_.latencyUs = roundTrip / 2;
        measuredLink_.usPerByte = std::max(0.0, both - roundTrip) / (2.0 * kStageBytes);
      }
    } else {
      for (int i = 0; i <= kEchoes; ++i) {
        recv(peer, nullptr, 0);
        send(peer, nullptr, 0);
      }
      recv(peer, scratch_.data(), kStageBytes);
      send(peer, scratch_.data(), kStageBytes);
    }
  }
}

void SyncMesh::send(int peer, const void* data, size_t bytes) {
  Peer& p = peers_[peer];
  WireCall header = call_;
  header.payloadBytes = static_cast<uint32_t>(bytes);
  if (p.shared) {
    shm::Wait wait = p.out.write(&header, kHeaderBytes, data, bytes, waiting(peer));
    if (wait != shm::Wait::Ready) lost(wait, peer, true);
    return;
  }
  detail::SigpipeGuard::beforeSocketWrites();
  std::memcpy(p.sendStage.data(), &header, kHeaderBytes);
  if (bytes > 0) copyBytes(p.sendStage.data() + kHeaderBytes, data, bytes);
  p.sendBuffer->send(0, kHeaderBytes + bytes, 0);
  p.sendBuffer->waitSend();
}

void SyncMesh::checkHeader(int peer, const WireCall& header, size_t bytes) const {
  const bool agreeing = call_.flags & WireCall::kAgreeing;
  const bool match = agreeing ? header.flags == call_.flags : header.sameCall(call_);
  if (!match || header.payloadBytes != bytes) throw mismatch(peer, header, match, bytes);
}

template <typename Consume>
void SyncMesh::recvShared(int peer, size_t bytes, Consume&& consume) {
  Peer& p = peers_[peer];
  WireCall header;
  const shm::Waiting deadline = waiting(peer);
  shm::Wait wait = p.in.readHeader(&header, kHeaderBytes, deadline);
  if (wait != shm::Wait::Ready) lost(wait, peer, false);
  checkHeader(peer, header, bytes);
  wait = p.in.readPayload(bytes, deadline, consume);
  if (wait != shm::Wait::Ready) lost(wait, peer, false);
}

void SyncMesh::recv(int peer, void* data, size_t bytes) {
  Peer& p = peers_[peer];
  if (p.shared) {
    auto* out = static_cast<uint8_t*>(data);
    recvShared(peer, bytes, [&](const uint8_t* piece, size_t n) {
      copyBytes(out, piece, n);
      out += n;
    });
    return;
  }
  detail::SigpipeGuard::beforeSocketWrites();  // a reading pair may write (Gloo's notifications)
  if (timeout_ != groupTimeout_ || spin_.budget().count() > 0) awaitReadable(peer);
  p.recvBuffer->waitRecv();
  WireCall header;
  std::memcpy(&header, p.recvStage.data(), kHeaderBytes);
  checkHeader(peer, header, bytes);
  if (bytes > 0) copyBytes(data, p.recvStage.data() + kHeaderBytes, bytes);
}

void SyncMesh::recvReduce(int peer, void* target, size_t count, size_t elementSize,
                          ReduceFunction reduce, bool incomingFirst) {
  auto fold = [&](uint8_t* into, const void* incoming, size_t n) {
    if (incomingFirst) {
      reduce(into, incoming, into, n);
    } else {
      reduce(into, into, incoming, n);
    }
  };
  if (!peers_[peer].shared) {
    recv(peer, scratch_.data(), count * elementSize);
    fold(static_cast<uint8_t*>(target), scratch_.data(), count);
    return;
  }
  auto* into = static_cast<uint8_t*>(target);
  // Pieces are whole slots of the channel, so whole elements (the last one ends the message).
  recvShared(peer, count * elementSize, [&](const uint8_t* piece, size_t n) {
    fold(into, piece, n / elementSize);
    into += n;
  });
}

std::chrono::steady_clock::time_point SyncMesh::deadline() {
  if (!deadlineSet_) {
    deadline_ = std::chrono::steady_clock::now() + timeout_;
    deadlineSet_ = true;
  }
  return deadline_;
}

shm::Waiting SyncMesh::waiting(int peer) {
  return {deadline(), peers_[peer].pid, spin_.next(), &spin_, yieldWhenWaiting_};
}

void SyncMesh::awaitReadable(int peer) {
  const int fd = peers_[peer].fd;
  if (fd < 0) return;
  using Clock = std::chrono::steady_clock;
  const auto until = deadline();
  const std::chrono::nanoseconds spinFor = spin_.next();
  if (spinFor.count() > 0) {
    const auto spinUntil = spinFor == shm::kSpinForever ? until : Clock::now() + spinFor;
    for (unsigned spins = 1;; ++spins) {
      char byte;
      const ssize_t got = ::recv(fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT);
      // Data, a closed connection or an error: Gloo's read sees it and says what it is.
      if (got != -1 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
        spin_.spun(true);
        return;
      }
      if (spins % 16 != 0) continue;  // a look is a system call: the clock every few
      const auto now = Clock::now();
      if (now >= until) lost(shm::Wait::TimedOut, peer, false);
      if (now >= spinUntil) break;
    }
    spin_.spun(false);
  }
  if (timeout_ == groupTimeout_) return;  // Gloo's blocking read waits as long as the group does
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - Clock::now());
    pollfd readable{fd, POLLIN, 0};
    const int ready =
        left.count() > 0 ? ::poll(&readable, 1, static_cast<int>(left.count()) + 1) : 0;
    if (ready != 0 && !(ready < 0 && errno == EINTR)) return;
    if (ready == 0 && Clock::now() >= until) lost(shm::Wait::TimedOut, peer, false);
  }
}

std::string SyncMesh::lossText(shm::Wait wait, int peer, bool sending) const {
  const std::string where =
      detail::concat("[shared memory ", sending ? "to" : "from", " rank ", peer, "]");
  switch (wait) {
    case shm::Wait::TimedOut:
      return detail::concat(sending ? "Write timeout " : "Read timeout ", where, " after ",
                            timeout_.count(), " ms");
    case shm::Wait::PeerEnded:
      return detail::concat("Connection closed by peer ", where, ": its process ", peers_[peer].pid,
                            " ended");
    default:
      return detail::concat("Connection closed by peer ", where);
  }
}

void SyncMesh::lost(shm::Wait wait, int peer, bool sending) const {
  throw gloo::IoException(lossText(wait, peer, sending));
}

std::string SyncMesh::connectSharedMemory(Store& store,
                                          const std::vector<std::pair<int, long>>& localPeerPids,
                                          bool enabled) {
  std::vector<int> local;
  for (const auto& [peer, pid] : localPeerPids) {
    if (peer != rank_) local.push_back(peer);
  }
  std::sort(local.begin(), local.end());
  if (local.empty()) return "no other rank of the group on this host: TCP only";
  yieldWhenWaiting_ =
      spin_.budget().count() == 0 && local.size() + 1 > detail::usableCores().usable;
  const auto timeout = groupTimeout_;
  auto key = [](const char* what, int r) { return detail::concat("shm/", what, "/", r); };
  // 1. Our segment holds the channel from each local peer, in the order of `local`:
  //    "<pid> <fd> <bytes> <rank>..." or "none <why>".
  std::string why;
  if (enabled) {
    try {
      inbound_ = shm::Segment::create(segmentBytes(local.size()));
      for (size_t i = 0; i < local.size(); ++i) {
        shm::Channel::initialize(inbound_.data() + channelOffset(i), kChannelBytes);
        shm::Channel::initialize(inbound_.data() + p2pChannelOffset(i, local.size()),
                                 kP2PChannelBytes);
      }
      std::memcpy(inbound_.data() + kProbeOffset, &kProbe, sizeof kProbe);
    } catch (const Error& e) {
      why = e.what();
    }
  } else {
    why = "C10D_SHM=0";
  }
  std::string offer = why.empty()
                          ? detail::concat(::getpid(), " ", inbound_.fd(), " ", inbound_.size(),
                                           " ", reinterpret_cast<uintptr_t>(inbound_.data()))
                          : "none " + why;
  if (why.empty()) {
    for (int peer : local) offer += detail::concat(" ", peer);
  }
  store.setString(key("offer", rank_), offer);
  std::vector<std::string> keys;
  for (int peer : local) keys.push_back(key("offer", peer));
  std::vector<Store::Bytes> offers = store.multiGet(keys, timeout);
  // 2. Map each peer's segment and find our channel toward it; tell them which we mapped.
  std::vector<std::string> refused(size_);
  std::string mapped, pulls;
  for (size_t i = 0; i < local.size(); ++i) {
    const int peer = local[i];
    std::istringstream fields(toString(offers[i]));
    std::string first;
    fields >> first;
    if (first == "none") {
      std::getline(fields >> std::ws, refused[peer]);
      refused[peer] = detail::concat("rank ", peer, ": ", refused[peer]);
      continue;
    }
    if (!why.empty()) continue;
    try {
      long pid = std::stol(first);
      int fd = -1;
      size_t bytes = 0;
      uint64_t address = 0;
      fields >> fd >> bytes >> address;
      std::vector<int> theirs;
      for (int r; fields >> r;) theirs.push_back(r);
      auto at = std::find(theirs.begin(), theirs.end(), rank_);
      C10D_CHECK(at != theirs.end(), Error, "rank ", peer, " has no channel for rank ", rank_,
                 " (do the ranks disagree on which share this host?)");
      shm::Segment segment = shm::Segment::open(pid, fd, bytes);
      const size_t index = static_cast<size_t>(at - theirs.begin());
      Peer& p = peers_[peer];
      p.out = shm::Channel(segment.data() + channelOffset(index));
      p.in = shm::Channel(inbound_.data() + channelOffset(i));
      p.p2pOut = shm::Channel(segment.data() + p2pChannelOffset(index, theirs.size()));
      p.p2pIn = shm::Channel(inbound_.data() + p2pChannelOffset(i, local.size()));
      p.doorbell = shm::Doorbell(segment.data());
      p.pid = pid;
      outbound_.push_back(std::move(segment));
      mapped += detail::concat(" ", peer);
      // Whether this rank can read the peer's memory too (point-to-point's large payloads).
      uint64_t probe = 0;
      if (shm::readProcessMemory(pid, address + kProbeOffset, &probe, sizeof probe).empty() &&
          probe == kProbe) {
        pulls += detail::concat(" ", peer);
      }
    } catch (const std::exception& e) {
      refused[peer] = detail::concat("rank ", peer, ": ", e.what());
    }
  }
  store.setString(key("mapped", rank_), detail::concat("ranks", mapped, " pulls", pulls));
  keys.clear();
  for (int peer : local) keys.push_back(key("mapped", peer));
  std::vector<Store::Bytes> mappedBy = store.multiGet(keys, timeout);
  // Every peer has opened our segment, or never will: the descriptor has done its job.
  inbound_.closeDescriptor();
  // 3. A pair moves to shared memory when both ends mapped the other's segment. Every rank of
  //    the host reads every one's list, so all agree on whether the whole group is on shared
  //    memory (allShared), which decides the path of large ops, and whether every rank can
  //    read every other's memory (pullsEverywhere), which point-to-point needs.
  std::vector<std::vector<int>> mappedByRank(size_), pullsByRank(size_);
  auto parse = [&](int of, const std::string& line) {
    std::istringstream fields(line);
    std::vector<int>* into = nullptr;
    for (std::string word; fields >> word;) {
      if (word == "ranks" || word == "pulls") {
        into = word == "ranks" ? &mappedByRank[of] : &pullsByRank[of];
      } else if (into != nullptr) {
        into->push_back(std::stoi(word));
      }
    }
  };
  parse(rank_, detail::concat("ranks", mapped, " pulls", pulls));
  for (size_t i = 0; i < local.size(); ++i) parse(local[i], toString(mappedBy[i]));
  // Sorted, so that the look over every pair of the host is H^2 log H (H^3 was seconds at 256).
  for (auto* lists : {&mappedByRank, &pullsByRank}) {
    for (std::vector<int>& list : *lists) std::sort(list.begin(), list.end());
  }
  auto has = [](const std::vector<int>& list, int r) {
    return std::binary_search(list.begin(), list.end(), r);
  };
  auto mutual = [&](int a, int b) { return has(mappedByRank[a], b) && has(mappedByRank[b], a); };
  std::vector<int> host = local;
  host.push_back(rank_);
  allShared_ = static_cast<int>(host.size()) == size_;
  bool everyPairPulls = true;
  for (int a : host) {
    for (int b : host) {
      allShared_ = allShared_ && (a == b || mutual(a, b));
      everyPairPulls = everyPairPulls && (a == b || has(pullsByRank[a], b));
    }
  }
  pullsEverywhere_ = allShared_ && everyPairPulls;
  std::string shared, tcp;
  for (int peer : local) {
    if (mutual(rank_, peer)) {
      // Neither end sends on the socket: it gets no staging (1 MiB per peer).
      peers_[peer].shared = true;
      shared += detail::concat(shared.empty() ? "" : ", ", peer);
    } else {
      tcp += detail::concat(tcp.empty() ? "" : "; ", "rank ", peer,
                            refused[peer].empty() ? "" : " (" + refused[peer] + ")");
    }
  }
  if (!why.empty()) return detail::concat("shared memory off on this rank (", why, "): TCP only");
  std::string line = shared.empty() ? std::string("no shared memory")
                                    : detail::concat("shared memory with rank(s) ", shared);
  if (!tcp.empty()) line += detail::concat("; TCP with local ", tcp);
  if (allShared_) {
    line += pullsEverywhere_
                ? " (the whole group: large ops stay on the fast path, and point-to-point takes it)"
                : " (the whole group: large ops stay on the fast path; point-to-point stays on "
                  "Gloo, since the ranks cannot read each other's memory)";
  }
  return line;
}

void SyncMesh::closeSharedMemory() {
  for (Peer& p : peers_) {
    if (!p.shared) continue;
    for (shm::Channel* channel : {&p.out, &p.in, &p.p2pOut, &p.p2pIn}) channel->close();
    p.doorbell.ring();
  }
  if (inbound_.data() != nullptr) p2pDoorbell().ring();
}

SyncMesh::P2PLink SyncMesh::p2pLink(int peer) {
  Peer& p = peers_[peer];
  return {&p.p2pOut, &p.p2pIn, &p.doorbell, p.pid};
}

WireMismatch SyncMesh::mismatch(int peer, const WireCall& header, bool sameCall,
                                size_t expectedBytes) const {
  std::string why;
  if (header.flags != call_.flags) {
    why =
        " (one of them runs it over Gloo's own algorithm: do their sizes or C10D_GLOO_FAST_PATH "
        "differ?)";
  } else if (sameCall) {
    why = detail::concat(" (", header.payloadBytes, " bytes where ", expectedBytes,
                         " were expected)");
  }
  if (previous_ && header.seq == previous_->seq && !header.sameCall(*previous_)) {
    why +=
        detail::concat(" (at that sequence number this rank called ", previous_->describe(), ")");
  }
  return {detail::concat("rank ", peer, " sent a message of ", header.describe(),
                         " while this rank runs ", call_.describe(), why)};
}

}  // namespace c10d::inline v1
