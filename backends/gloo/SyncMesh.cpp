#include "backends/gloo/SyncMesh.hpp"

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

#include "backends/gloo/CostModel.hpp"
#include "backends/gloo/GlooSetup.hpp"
#include "c10d/core/Cores.hpp"
#include "c10d/core/Exception.hpp"
#include "c10d/core/Signals.hpp"
#include "store/Store.hpp"

namespace c10d::inline v0 {

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
  std::vector<int> everyone(size_);
  for (int r = 0; r < size_; ++r) everyone[r] = r;
  all_ = teamOf(everyone);
  host_ = all_;
  hostOfRank_.assign(size_, 0);
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

namespace {

// Calls fn(offset, length) for consecutive pieces of at most piece units covering total.
template <typename Fn>
void inPieces(size_t total, size_t piece, Fn&& fn) {
  for (size_t offset = 0; offset < total; offset += piece)
    fn(offset, std::min(piece, total - offset));
}

}  // namespace

SyncMesh::Team SyncMesh::teamOf(std::vector<int> ranks) const {
  Team team;
  team.ranks = std::move(ranks);
  auto at = std::find(team.ranks.begin(), team.ranks.end(), rank_);
  team.me = at == team.ranks.end() ? -1 : static_cast<int>(at - team.ranks.begin());
  return team;
}

SyncMesh::Team SyncMesh::representatives(int root) const {
  std::vector<int> reps(hosts_, -1);
  for (int r = 0; r < size_; ++r) {
    if (reps[hostOfRank_[r]] < 0) reps[hostOfRank_[r]] = r;
  }
  if (root >= 0) reps[hostOfRank_[root]] = root;
  return teamOf(std::move(reps));
}

int SyncMesh::indexOnHost(int rep) const {
  return static_cast<int>(std::find(host_.ranks.begin(), host_.ranks.end(), rep) -
                          host_.ranks.begin());
}

int SyncMesh::crossings(const std::vector<int>& hostOfRank, const std::vector<int>& members) {
  const int n = static_cast<int>(members.size());
  int pow2 = 1;
  while (pow2 * 2 <= n) pow2 *= 2;
  auto apart = [&](int a, int b) { return hostOfRank[members[a]] != hostOfRank[members[b]]; };
  int count = 0;
  for (int i = 0; i < n - pow2; ++i) {
    if (apart(i, i + pow2)) {
      count += 2;  // the fold and the unfold
      break;
    }
  }
  for (int distance = 1; distance < pow2; distance *= 2) {
    for (int i = 0; i < pow2; ++i) {
      if (apart(i, i ^ distance)) {
        ++count;
        break;
      }
    }
  }
  return count;
}

std::string SyncMesh::setHosts(const std::vector<int>& hostOfRank, Hierarchy hierarchy) {
  hostOfRank_ = hostOfRank;
  hosts_ = 1 + *std::max_element(hostOfRank_.begin(), hostOfRank_.end());
  ranksOfHost_.assign(hosts_, {});
  for (int r = 0; r < size_; ++r) ranksOfHost_[hostOfRank_[r]].push_back(r);
  host_ = teamOf(ranksOfHost_[hostOfRank_[rank_]]);
  if (hosts_ == 1) return "";
  // With one rank per host there is nothing to do within hosts: flat is the same.
  leaders_ = representatives(-1);
  const int flat = crossings(hostOfRank_, all_.ranks);
  const int layered = crossings(hostOfRank_, leaders_.ranks);
  hierarchical_ = hosts_ < size_ &&
                  (hierarchy == Hierarchy::On || (hierarchy == Hierarchy::Auto && layered < flat));
  std::string ranks;
  for (int r : host_.ranks) ranks += detail::concat(ranks.empty() ? "" : ", ", r);
  const char* why = hierarchy == Hierarchy::On    ? "C10D_GLOO_HIERARCHICAL=1"
                    : hierarchy == Hierarchy::Off ? "C10D_GLOO_HIERARCHICAL=0 on some rank"
                                                  : "auto";
  return detail::concat(hosts_, " hosts (this one: rank(s) ", ranks,
                        "); allreduce, broadcast, reduce, allgather and reduce_scatter ",
                        hierarchical_ ? "are hierarchical" : "are flat over every rank", " (", why,
                        "; their messages cross hosts ", layered, " times in turn hierarchical, ",
                        flat, " flat)");
}

void SyncMesh::allreduce(void* data, size_t count, size_t elementSize, ReduceFunction reduce) {
  if (!hierarchical_) {
    allreduceIn(all_, data, count, elementSize, reduce);
    return;
  }
  // Into the lowest rank of each host, among those, and back out: every rank ends with the
  // bits its host's lowest rank computed, which are the same on every host.
  if (host_.size() > 1) reduceIn(host_, data, count, elementSize, reduce, 0);
  if (host_.me == 0) allreduceIn(leaders_, data, count, elementSize, reduce);
  if (host_.size() > 1) broadcastIn(host_, data, count * elementSize, 0);
}

template <typename Algorithm>
Algorithm SyncMesh::choose(const std::optional<Algorithm>& forced, const Team& team, size_t bytes,
                           Algorithm onSharedMemory) const {
  if (forced) return *forced;
  // Over sockets (a team of the whole group, or of the hosts' leaders, with some pair on TCP),
  // the cost model over the group's link; on shared memory, by size (measured,
  // docs/performance.md "Same-host shared memory").
  if (!allShared_ && &team != &host_) {
    return cost::cheapest<Algorithm>(team.size(), bytes, link_, kMaxMessageBytes);
  }
  return onSharedMemory;
}

void SyncMesh::allreduceIn(const Team& team, void* data, size_t count, size_t elementSize,
                           ReduceFunction reduce) {
  if (team.size() < 2) return;
  const size_t bytes = count * elementSize;
  switch (choose(forced_.allreduce, team, bytes,
                 bytes > kMaxMessageBytes ? cost::AllreduceAlgorithm::Ring
                                          : cost::AllreduceAlgorithm::RecursiveDoubling)) {
    case cost::AllreduceAlgorithm::Ring:
      ringAllreduce(team, data, count, elementSize, reduce);
      return;
    case cost::AllreduceAlgorithm::HalvingDoubling:
      halvingDoublingAllreduce(team, data, count, elementSize, reduce);
      return;
    case cost::AllreduceAlgorithm::RecursiveDoubling:
      // Chosen over a message's limit only when forced: then piece by piece.
      inPieces(count, kMaxMessageBytes / elementSize, [&](size_t offset, size_t n) {
        recursiveDoublingAllreduce(team, static_cast<uint8_t*>(data) + offset * elementSize, n,
                                   elementSize, reduce);
      });
      return;
  }
}

// Recursive doubling among the largest power of two p' <= size; the size - p' members above it
// first fold their data into a partner below and get the result back at the end. Partners
// combine each other's data in the same order, so every member ends with identical bits.
void SyncMesh::recursiveDoublingAllreduce(const Team& team, void* data, size_t count,
                                          size_t elementSize, ReduceFunction reduce) {
  const size_t bytes = count * elementSize;
  const int me = team.me;
  int pow2 = 1;
  while (pow2 * 2 <= team.size()) pow2 *= 2;
  const int extra = team.size() - pow2;
  if (me >= pow2) {
    send(team[me - pow2], data, bytes);
    recv(team[me - pow2], data, bytes);
    return;
  }
  if (me < extra) recvReduce(team[me + pow2], data, count, elementSize, reduce, false);
  for (int distance = 1; distance < pow2; distance *= 2) {
    int partner = me ^ distance;
    send(team[partner], data, bytes);
    // The lower member's data goes first on both sides.
    recvReduce(team[partner], data, count, elementSize, reduce, partner < me);
  }
  if (me < extra) send(team[me + pow2], data, bytes);
}

// One phase of a ring over `count` elements cut in team.size() segments of `segment` elements.
// In step s member m sends segment (m - s + shift) to its right and receives segment
// (m - s - 1 + shift) from its left. With reduce (reduce-scatter), what arrives is folded into
// our copy of that segment, and after size-1 steps we hold the full reduction of segment
// (m + shift + 1). Without it (allgather), what arrives replaces our copy, starting from the
// segment (m + shift) we own.
void SyncMesh::ringPhase(const Team& team, uint8_t* base, size_t count, size_t segment,
                         size_t elementSize, int shift, ReduceFunction reduce) {
  const int n = team.size();
  const int me = team.me;
  const int right = team[me + 1];
  const int left = team[me - 1];
  auto begin = [&](int index) {
    return std::min(count, static_cast<size_t>((index % n + n) % n) * segment);
  };
  auto length = [&](int index) { return std::min(count, begin(index) + segment) - begin(index); };
  for (int step = 0; step < n - 1; ++step) {
    int sendIndex = me - step + shift, recvIndex = me - step - 1 + shift;
    sendRecvPieces(right, base + begin(sendIndex) * elementSize, length(sendIndex), left,
                   base + begin(recvIndex) * elementSize, length(recvIndex), elementSize, reduce);
  }
}

void SyncMesh::ringAllreduce(const Team& team, void* data, size_t count, size_t elementSize,
                             ReduceFunction reduce) {
  auto* base = static_cast<uint8_t*>(data);
  const size_t segment = (count + team.size() - 1) / team.size();
  // Each segment's final value is computed once, by its owner, and then copied: identical bits
  // on every member.
  ringPhase(team, base, count, segment, elementSize, 0, reduce);
  ringPhase(team, base, count, segment, elementSize, 1, nullptr);
}

// Sends sendCount elements from `out` to `to` while receiving recvCount elements from `from`,
// folded into `in` (reduce: in = incoming op in) or copied there, piece by piece: a piece out,
// then a piece in (each socket and channel buffers one piece each way). Each link carries
// ceil(count / piece) messages of the sender's count, which its receiver counts alike.
void SyncMesh::sendRecvPieces(int to, const uint8_t* out, size_t sendCount, int from, uint8_t* in,
                              size_t recvCount, size_t elementSize, ReduceFunction reduce) {
  const size_t piece = kMaxMessageBytes / elementSize;
  inPieces(std::max(sendCount, recvCount), piece, [&](size_t done, size_t) {
    if (done < sendCount) {
      send(to, out + done * elementSize, std::min(piece, sendCount - done) * elementSize);
    }
    if (done >= recvCount) return;
    const size_t r = std::min(piece, recvCount - done);
    if (reduce) {
      recvReduce(from, in + done * elementSize, r, elementSize, reduce, true);
    } else {
      recv(from, in + done * elementSize, r * elementSize);
    }
  });
}

// Elements [sendBegin, sendEnd) of base to peer, and [recvBegin, recvEnd) from it.
void SyncMesh::exchangeRanges(int peer, uint8_t* base, size_t sendBegin, size_t sendEnd,
                              size_t recvBegin, size_t recvEnd, size_t elementSize,
                              ReduceFunction reduce) {
  sendRecvPieces(peer, base + sendBegin * elementSize, sendEnd - sendBegin, peer,
                 base + recvBegin * elementSize, recvEnd - recvBegin, elementSize, reduce);
}

// Rabenseifner's allreduce: a reduce-scatter by recursive halving, then an allgather by recursive
// doubling over the same partners in reverse. 2 log2(p) messages, and each member sends 2(p-1)/p
// of the buffer as in a ring (recursive doubling sends log2(p) times all of it). Members above
// the largest power of two fold into a partner below first and get the result at the end. Each
// element's final value is computed by one member and copied: identical bits on every member.
void SyncMesh::halvingDoublingAllreduce(const Team& team, void* data, size_t count,
                                        size_t elementSize, ReduceFunction reduce) {
  auto* base = static_cast<uint8_t*>(data);
  const int me = team.me;
  int pow2 = 1;
  while (pow2 * 2 <= team.size()) pow2 *= 2;
  const int extra = team.size() - pow2;
  if (me >= pow2) {
    exchangeRanges(team[me - pow2], base, 0, count, 0, 0, elementSize, nullptr);
    exchangeRanges(team[me - pow2], base, 0, 0, 0, count, elementSize, nullptr);
    return;
  }
  if (me < extra) exchangeRanges(team[me + pow2], base, 0, 0, 0, count, elementSize, reduce);
  // Partners at distance d share every choice made at the larger distances, so the same range.
  size_t begin = 0, end = count;
  std::pair<size_t, size_t> wider[64];  // the range before each halving: no allocation per op
  int depth = 0;
  for (int distance = pow2 / 2; distance >= 1; distance /= 2) {
    const size_t middle = begin + (end - begin) / 2;
    const bool lowerHalf = (me & distance) == 0;
    const size_t keepBegin = lowerHalf ? begin : middle, keepEnd = lowerHalf ? middle : end;
    const size_t giveBegin = lowerHalf ? middle : begin, giveEnd = lowerHalf ? end : middle;
    exchangeRanges(team[me ^ distance], base, giveBegin, giveEnd, keepBegin, keepEnd, elementSize,
                   reduce);
    wider[depth++] = {begin, end};
    begin = keepBegin;
    end = keepEnd;
  }
  for (int distance = 1; distance < pow2; distance *= 2) {
    const auto [outerBegin, outerEnd] = wider[--depth];
    // We own [begin, end), one half of the outer range; the partner owns the other half.
    const size_t otherBegin = begin == outerBegin ? end : outerBegin;
    const size_t otherEnd = begin == outerBegin ? outerEnd : begin;
    exchangeRanges(team[me ^ distance], base, begin, end, otherBegin, otherEnd, elementSize,
                   nullptr);
    begin = outerBegin;
    end = outerEnd;
  }
  if (me < extra) exchangeRanges(team[me + pow2], base, 0, count, 0, 0, elementSize, nullptr);
}

void SyncMesh::reduceScatter(void* data, size_t blockCount, size_t elementSize,
                             ReduceFunction reduce) {
  auto* base = static_cast<uint8_t*>(data);
  if (!hierarchical_) {
    // Shift -1 so that rank r ends up owning block r.
    ringPhase(all_, base, blockCount * size_, blockCount, elementSize, -1, reduce);
    return;
  }
  // Every block into the lowest rank of each host; each of those sums its host's blocks over the
  // hosts; each block out to its rank.
  const size_t blockBytes = blockCount * elementSize;
  if (host_.size() > 1) reduceIn(host_, data, blockCount * size_, elementSize, reduce, 0);
  if (host_.me == 0) exchangeAmongLeaders(base, blockBytes, elementSize, reduce);
  if (host_.size() == 1) return;
  if (host_.me == 0) {
    for (int i = 1; i < host_.size(); ++i) {
      inPieces(blockBytes, pieceBytes(elementSize), [&](size_t offset, size_t n) {
        send(host_[i], base + host_[i] * blockBytes + offset, n);
      });
    }
  } else {
    inPieces(blockBytes, pieceBytes(elementSize), [&](size_t offset, size_t n) {
      recv(host_[0], base + rank_ * blockBytes + offset, n);
    });
  }
}

// Among the lowest ranks of the hosts, pairwise: in step s, to the one s hosts on and from the one
// s hosts back. With reduce (reduce-scatter), each sends a host the blocks of that host's ranks
// and folds what arrives into its own host's blocks; without (allgather), each sends its own
// host's blocks and takes those of the sender's host. Blocks travel from and to their ranks'
// places in base, in pieces; both ends of a pair count the same pieces from the same layout.
void SyncMesh::exchangeAmongLeaders(uint8_t* base, size_t blockBytes, size_t elementSize,
                                    ReduceFunction reduce) {
  const int me = leaders_.me;
  const size_t piece = pieceBytes(elementSize);
  const size_t perBlock = (blockBytes + piece - 1) / piece;
  // Piece k of host h's blocks, in rank order: (offset in base, bytes).
  auto pieceOf = [&](int host, size_t k) {
    const size_t offset = k % perBlock * piece;
    return std::pair<size_t, size_t>(ranksOfHost_[host][k / perBlock] * blockBytes + offset,
                                     std::min(piece, blockBytes - offset));
  };
  for (int step = 1; step < hosts_; ++step) {
    const int to = (me + step) % hosts_;
    const int from = (me - step + hosts_) % hosts_;
    const int outHost = reduce ? to : me;
    const int inHost = reduce ? me : from;
    const size_t outCount = perBlock * ranksOfHost_[outHost].size();
    const size_t inCount = perBlock * ranksOfHost_[inHost].size();
    for (size_t k = 0; k < std::max(outCount, inCount); ++k) {
      if (k < outCount) {
        auto [offset, n] = pieceOf(outHost, k);
        send(leaders_[to], base + offset, n);
      }
      if (k >= inCount) continue;
      auto [offset, n] = pieceOf(inHost, k);
      if (reduce) {
        recvReduce(leaders_[from], base + offset, n / elementSize, elementSize, reduce, false);
      } else {
        recv(leaders_[from], base + offset, n);
      }
    }
  }
}

void SyncMesh::reduce(void* data, size_t count, size_t elementSize, ReduceFunction reduceFn,
                      int root) {
  if (!hierarchical_) {
    reduceIn(all_, data, count, elementSize, reduceFn, root);
    return;
  }
  const Team reps = representatives(root);
  const int rep = reps[hostOfRank_[rank_]];
  if (host_.size() > 1) reduceIn(host_, data, count, elementSize, reduceFn, indexOnHost(rep));
  if (reps.me >= 0) reduceIn(reps, data, count, elementSize, reduceFn, hostOfRank_[root]);
}

// Binomial tree toward the root over members relative to it, piece by piece.
void SyncMesh::reduceIn(const Team& team, void* data, size_t count, size_t elementSize,
                        ReduceFunction reduceFn, int rootIndex) {
  const int n = team.size();
  const int relative = (team.me - rootIndex + n) % n;
  inPieces(count, kMaxMessageBytes / elementSize, [&](size_t offset, size_t length) {
    uint8_t* piece = static_cast<uint8_t*>(data) + offset * elementSize;
    for (int mask = 1; mask < n; mask *= 2) {
      if (relative & mask) {
        send(team[relative - mask + rootIndex], piece, length * elementSize);
        return;
      }
      int child = relative + mask;
      if (child < n) {
        recvReduce(team[child + rootIndex], piece, length, elementSize, reduceFn, false);
      }
    }
  });
}

void SyncMesh::broadcast(void* data, size_t bytes, int root) {
  if (!hierarchical_) {
    broadcastIn(all_, data, bytes, root);
    return;
  }
  const Team reps = representatives(root);
  if (reps.me >= 0) broadcastIn(reps, data, bytes, hostOfRank_[root]);
  if (host_.size() > 1) broadcastIn(host_, data, bytes, indexOnHost(reps[hostOfRank_[rank_]]));
}

bool SyncMesh::broadcastsPastOneMessage(size_t bytes) const {
  const Team& across = hierarchical_ ? leaders_ : all_;
  return forced_.broadcast ||
         choose(forced_.broadcast, across, bytes, cost::BroadcastAlgorithm::Binomial) !=
             cost::BroadcastAlgorithm::Binomial;
}

void SyncMesh::broadcastIn(const Team& team, void* data, size_t bytes, int rootIndex) {
  if (team.size() < 2) return;
  auto* base = static_cast<uint8_t*>(data);
  switch (choose(forced_.broadcast, team, bytes, cost::BroadcastAlgorithm::Binomial)) {
    case cost::BroadcastAlgorithm::Binomial:
      binomialBroadcast(team, base, bytes, rootIndex);
      return;
    case cost::BroadcastAlgorithm::ScatterAllgather:
      scatterAllgatherBroadcast(team, base, bytes, rootIndex);
      return;
    case cost::BroadcastAlgorithm::Pipeline:
      pipelineBroadcast(team, base, bytes, rootIndex);
      return;
  }
}

// Binomial tree from the root, piece by piece (each member forwards a piece as soon as it has it).
void SyncMesh::binomialBroadcast(const Team& team, uint8_t* data, size_t bytes, int rootIndex) {
  const int n = team.size();
  const int relative = (team.me - rootIndex + n) % n;
  int parentMask = 1;
  while (parentMask < n && !(relative & parentMask)) parentMask *= 2;
  inPieces(bytes, kMaxMessageBytes, [&](size_t offset, size_t length) {
    uint8_t* piece = data + offset;
    if (parentMask < n) recv(team[relative - parentMask + rootIndex], piece, length);
    for (int mask = parentMask / 2; mask > 0; mask /= 2) {
      if (relative + mask < n) send(team[relative + mask + rootIndex], piece, length);
    }
  });
}

// van de Geijn: the buffer cut in one segment per member (by index relative to the root), each
// member's subtree's segments down a binomial tree, then a ring allgather of the segments. Each
// member sends about 2(p-1)/p of the buffer where the root of a binomial tree sends log2(p) times
// all of it.
void SyncMesh::scatterAllgatherBroadcast(const Team& team, uint8_t* data, size_t bytes,
                                         int rootIndex) {
  const int n = team.size();
  const int relative = (team.me - rootIndex + n) % n;
  const size_t segment = (bytes + n - 1) / n;
  auto at = [&](int index) { return std::min(static_cast<size_t>(index) * segment, bytes); };
  int parentMask = 1;
  while (parentMask < n && !(relative & parentMask)) parentMask *= 2;
  if (parentMask < n) {
    exchangeRanges(team[relative - parentMask + rootIndex], data, 0, 0, at(relative),
                   at(std::min(relative + parentMask, n)), 1, nullptr);
  }
  for (int mask = parentMask / 2; mask > 0; mask /= 2) {
    const int child = relative + mask;
    if (child < n) {
      exchangeRanges(team[child + rootIndex], data, at(child), at(std::min(child + mask, n)), 0, 0,
                     1, nullptr);
    }
  }
  // Member m owns segment m - rootIndex.
  ringPhase(team, data, bytes, segment, 1, -rootIndex, nullptr);
}

// A chain from the root in member order, in pieces sized for the link (cost::pipelinePiece):
// each member passes a piece on as soon as it has it, so the buffer crosses each link once.
void SyncMesh::pipelineBroadcast(const Team& team, uint8_t* data, size_t bytes, int rootIndex) {
  const int n = team.size();
  const int relative = (team.me - rootIndex + n) % n;
  inPieces(bytes, cost::pipelinePiece(n, bytes, link_, kMaxMessageBytes),
           [&](size_t offset, size_t length) {
             if (relative > 0) recv(team[team.me - 1], data + offset, length);
             if (relative < n - 1) send(team[team.me + 1], data + offset, length);
           });
}

void SyncMesh::allgather(void* output, size_t bytes) {
  auto* base = static_cast<uint8_t*>(output);
  if (!hierarchical_) {
    if (choose(forced_.allgather, all_, bytes, cost::AllgatherAlgorithm::Ring) ==
        cost::AllgatherAlgorithm::Bruck) {
      bruckAllgather(base, bytes);
    } else {
      ringPhase(all_, base, bytes * size_, bytes, 1, 0, nullptr);
    }
    return;
  }
  // Every block into the lowest rank of its host, among those a host's blocks at a time, and the
  // whole output out to every rank of each host.
  if (host_.size() > 1) {
    for (int i = 1; i < host_.size(); ++i) {
      if (host_.me != 0 && host_.me != i) continue;
      inPieces(bytes, kMaxMessageBytes, [&](size_t offset, size_t n) {
        uint8_t* block = base + host_[i] * bytes + offset;
        host_.me == 0 ? recv(host_[i], block, n) : send(host_[0], block, n);
      });
    }
  }
  if (host_.me == 0) exchangeAmongLeaders(base, bytes, 1, nullptr);
  if (host_.size() > 1) broadcastIn(host_, output, bytes * size_, 0);
}

// Bruck: in the step at distance d, the blocks held so far ([rank, rank + d), at most p - d of
// them) go to rank - d, and blocks [rank + d, rank + 2d) come from rank + d: ceil(log2 p) steps
// where a ring takes p - 1. Block indices wrap, so a step's blocks are two runs of the output at
// most; both ends of a link see the same blocks, so the same pieces, and pieces out and in
// alternate across the runs (sending one run after the other left each link idle for a block).
void SyncMesh::bruckAllgather(uint8_t* base, size_t bytes) {
  const int p = size_;
  const size_t piece = kMaxMessageBytes;
  for (int distance = 1; distance < p; distance *= 2) {
    const int count = std::min(distance, p - distance);
    // The blocks from `first` as two runs: up to the output's end, then on from block 0.
    struct Runs {
      size_t offset[2], length[2], pieces[2];
      size_t total() const { return pieces[0] + pieces[1]; }
      std::pair<size_t, size_t> pieceAt(size_t k, size_t piece) const {  // (offset, bytes)
        const int run = k < pieces[0] ? 0 : 1;
        const size_t done = (run == 0 ? k : k - pieces[0]) * piece;
        return {offset[run] + done, std::min(piece, length[run] - done)};
      }
    };
    auto runsFrom = [&](int first) {
      const size_t head = static_cast<size_t>(std::min(count, p - first));
      Runs runs{{first * bytes, 0}, {head * bytes, (count - head) * bytes}, {0, 0}};
      for (int r = 0; r < 2; ++r) runs.pieces[r] = (runs.length[r] + piece - 1) / piece;
      return runs;
    };
    const Runs out = runsFrom(rank_), in = runsFrom((rank_ + distance) % p);
    const int to = (rank_ - distance + p) % p, from = (rank_ + distance) % p;
    for (size_t k = 0; k < std::max(out.total(), in.total()); ++k) {
      if (k < out.total()) {
        const auto [offset, n] = out.pieceAt(k, piece);
        send(to, base + offset, n);
      }
      if (k < in.total()) {
        const auto [offset, n] = in.pieceAt(k, piece);
        recv(from, base + offset, n);
      }
    }
  }
}

// Pairwise: in step s, send to rank + s and receive from rank - s, piece by piece.
void SyncMesh::alltoall(const void* input, void* output, size_t blockBytes) {
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  copyBytes(out + rank_ * blockBytes, in + rank_ * blockBytes, blockBytes);
  for (int step = 1; step < size_; ++step) {
    int to = (rank_ + step) % size_;
    int from = (rank_ - step + size_) % size_;
    inPieces(blockBytes, kMaxMessageBytes, [&](size_t offset, size_t n) {
      send(to, in + to * blockBytes + offset, n);
      recv(from, out + from * blockBytes + offset, n);
    });
  }
}

// Dissemination: after round k every rank has heard, directly or not, from 2^(k+1) ranks.
void SyncMesh::barrier() {
  uint8_t token = 0;
  for (int distance = 1; distance < size_; distance *= 2) {
    send((rank_ + distance) % size_, &token, 1);
    recv((rank_ - distance + size_) % size_, &token, 1);
  }
}

}  // namespace c10d::inline v0
