#pragma once

// Private to backends/gloo. The collectives' transport: blocking messages between any two ranks
// of the group, each pair on a shared memory channel (ranks of one host) or on a TCP pair of a
// second Gloo context run in Gloo's synchronous mode, so a message is one blocking write on the
// sender's thread and one blocking read on the receiver's, with no device-thread hand-off and no
// send/recv rendezvous round trip (what Gloo's unbound buffers cost per message). The algorithms
// over it are in algorithms/MeshAlgorithms.hpp; tagged point-to-point takes its own channels
// (SharedPointToPoint.hpp) or Gloo's (PointToPoint.hpp).

#include <gloo/rendezvous/context.h>
#include <gloo/transport/buffer.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "backends/common/Reduce.hpp"
#include "backends/gloo/transport/LinkCost.hpp"
#include "backends/gloo/transport/WireCall.hpp"
#include "c10d/net/SharedMemory.hpp"

namespace c10d::inline v1 {

class Store;

class SyncMesh {
 public:
  // Messages up to this size are safe to send from both ends of a pair at once: the kernel's
  // socket buffers hold them, so neither blocking write waits for the other side to read.
  // The staging buffers are twice as large: prepareSockets sends one message that big on
  // every pair, which makes Gloo size the sockets' send buffers once, with room to spare. (A
  // send buffer sized to the message made the write wait for an ACK the peer delays by 40 ms.)
  static constexpr size_t kMaxMessageBytes = 256 * 1024;
  static constexpr size_t kStageBytes = 2 * kMaxMessageBytes;
  static constexpr size_t kHeaderBytes = sizeof(WireCall);

  // Each direction between two ranks of one host: room for two messages of the largest size,
  // as the sockets have (see kStageBytes). Its pages are touched only as far as messages reach.
  // A page more than two payloads holds their header slots and keeps every channel of a segment
  // page-aligned.
  static constexpr size_t kChannelBytes = 2 * kMaxMessageBytes + 4096;
  static_assert(kChannelBytes >= 2 * (kMaxMessageBytes + 2 * shm::Channel::kSlotBytes));
  static_assert(shm::Channel::bytesFor(kChannelBytes) % 4096 == 0);
  // Each direction's point-to-point messages (SharedPointToPoint.hpp), apart from the
  // collectives' since they come in any order: room for several heads of the largest eager size.
  static constexpr size_t kP2PChannelBytes = 256 * 1024;

  // The mesh of rank among size ranks, whose messages wait at most groupTimeout (unless a call
  // says otherwise); a read spins up to spinFor before it sleeps, while spinning pays
  // (shm::SpinGovernor; only sensible with a core per rank). It has no channel yet:
  // connectSharedMemory moves the pairs of this host's ranks onto shared memory, and the pairs left
  // (if any) take the sockets of a context given to attachSockets.
  SyncMesh(int rank, int size, std::chrono::milliseconds groupTimeout,
           std::chrono::nanoseconds spinFor);
  // Collective, after connectSharedMemory: the pairs left on TCP take context's (connected, its
  // timeout the group's), switched to sync mode, each with its staging (1 MiB); each socket's
  // send buffer is sized with one large message each way (see kStageBytes). peerAddresses: by
  // rank, the listening address of that rank's pair toward this rank (findSockets).
  void attachSockets(std::shared_ptr<gloo::rendezvous::Context> context,
                     const std::vector<std::string>& peerAddresses);
  // Whether some pair is on TCP: attachSockets is needed (the same answer on every rank).
  bool needsSockets() const { return !allShared_; }
  // Closes the shared memory channels, so that a peer still waiting on this rank fails at once,
  // as it would on the closed sockets.
  ~SyncMesh() { closeSharedMemory(); }
  SyncMesh(const SyncMesh&) = delete;
  SyncMesh& operator=(const SyncMesh&) = delete;

  // Moves the pairs with ranks on this host (localPeerPids: rank, pid) onto shared memory
  // channels, where both ranks of a pair can map each other's segment; the rest need TCP.
  // Collective over the group (every rank calls it, with enabled false where C10D_SHM=0, which
  // keeps its pairs on TCP at both ends). Returns what it chose, for the log. Throws StoreError
  // or TimeoutError when the store fails.
  std::string connectSharedMemory(Store& store,
                                  const std::vector<std::pair<int, long>>& localPeerPids,
                                  bool enabled);
  // Ends every wait on this rank's channels, at both ends (the group is broken).
  void closeSharedMemory();
  // Whether every pair of the group is on shared memory (the same answer on every rank).
  bool allShared() const { return allShared_; }
  // Whether, besides, every rank can read every other's memory (process_vm_readv, which a
  // hardened kernel may refuse where mapping a segment works): point-to-point then takes the
  // point-to-point channels (SharedPointToPoint.hpp). The same answer on every rank.
  bool pullsEverywhere() const { return pullsEverywhere_; }
  // The point-to-point channels with peer, the doorbell it sleeps on, and its process.
  struct P2PLink {
    shm::Channel* out;
    shm::Channel* in;
    shm::Doorbell* doorbell;
    long pid;
  };
  P2PLink p2pLink(int peer);
  // How a shared memory wait on peer that did not end Ready reads in Gloo's words for a pair
  // (GlooFailure.hpp), so that every failure takes one path: "Read timeout [shared memory
  // from rank 1] after 30000 ms", "Connection closed by peer [shared memory to rank 1]: its
  // process 4242 ended".
  std::string lossText(shm::Wait wait, int peer, bool sending) const;
  // The doorbell this rank's point-to-point readers sleep on; every peer's writes ring it.
  shm::Doorbell p2pDoorbell() const { return shm::Doorbell(inbound_.data()); }
  // The call that the next messages carry, and that messages received must match (see
  // WireCall.hpp); with WireCall::kAgreeing, received ones need only be agreeing too.
  // Starts the call's deadline too, timeout from its first wait: its waits share it, read from
  // the clock once. A timeout other than the group's (the one Gloo's pairs were made with) is
  // honoured on sockets too, by waiting for each read's data before Gloo reads.
  void setCall(const WireCall& call, std::chrono::milliseconds timeout) {
    if (call.seq != call_.seq) previous_ = call_;
    call_ = call;
    timeout_ = timeout;
    deadlineSet_ = false;
  }

  std::chrono::nanoseconds spinFor() const { return spin_.budget(); }
  int rank() const { return rank_; }
  int size() const { return size_; }
  // The context whose pairs carry the TCP ones; null when every pair is on shared memory.
  gloo::rendezvous::Context* context() const { return context_.get(); }

  // Blocking point-to-point messages of at most kMaxMessageBytes, after the call's header. recv
  // throws WireMismatch for a message of another call or size, before it uses its payload.
  void send(int peer, const void* data, size_t bytes);
  void recv(int peer, void* data, size_t bytes);
  // recv of count elements reduced into target: target = incoming op target when incomingFirst,
  // else target op incoming. Over shared memory it reduces from the channel, without a copy.
  void recvReduce(int peer, void* target, size_t count, size_t elementSize, ReduceFunction reduce,
                  bool incomingFirst);

  // What attachSockets measured on this rank's first TCP pair when this rank was its lower end
  // (zero otherwise): rank 0's is the group's, agreed through the store by the backend.
  const cost::LinkCost& measuredLink() const { return measuredLink_; }

 private:
  // What a message that contradicts call_ says, for the error.
  WireMismatch mismatch(int peer, const WireCall& header, bool sameCall,
                        size_t expectedBytes) const;

  struct Peer {
    std::vector<uint8_t> sendStage, recvStage;
    std::unique_ptr<gloo::transport::Buffer> sendBuffer, recvBuffer;
    bool shared = false;  // on shared memory: out and in, instead of the buffers
    shm::Channel out, in;
    shm::Channel p2pOut, p2pIn;
    shm::Doorbell doorbell;  // the peer's, in its segment
    long pid = 0;
    int fd = -1;  // the TCP pair's socket
  };
  // The header of a message from peer, checked against call_ (throws WireMismatch).
  void checkHeader(int peer, const WireCall& header, size_t bytes) const;
  // A message of bytes from peer over shared memory, its payload handed to consume in place.
  template <typename Consume>
  void recvShared(int peer, size_t bytes, Consume&& consume);
  // How a wait on peer ends: at the call's deadline (set at its first wait), or when the peer's
  // process ends.
  shm::Waiting waiting(int peer);
  // The call's deadline, read from the clock at its first wait.
  std::chrono::steady_clock::time_point deadline();
  // Before Gloo reads from peer's socket: spins for the message's first byte (SpinGovernor), then,
  // under a call whose timeout is not the group's, waits for it until the call's deadline (Gloo's
  // own read would give up at the group's), throwing Gloo's read timeout when it passes.
  void awaitReadable(int peer);
  // Finds each TCP pair's socket (Gloo keeps them to itself), for the calls whose timeout is
  // not the group's: a pair's connection has, at one end, the address its listening side
  // published (this rank's pair's own, or peerAddresses[peer], the peer's pair toward this
  // rank). A pair whose socket is not found waits with the group's timeout.
  void findSockets(const std::vector<std::string>& peerAddresses);
  std::chrono::milliseconds timeout_{0};  // the call's
  std::chrono::steady_clock::time_point deadline_;
  bool deadlineSet_ = false;
  // A shared memory wait that did not end Ready, as Gloo's exception for a pair (lossText).
  [[noreturn]] void lost(shm::Wait wait, int peer, bool sending) const;

  std::shared_ptr<gloo::rendezvous::Context> context_;
  std::chrono::milliseconds groupTimeout_;
  int rank_;
  int size_;
  std::vector<Peer> peers_;
  shm::SpinGovernor spin_;  // the ops' waits, one at a time
  cost::LinkCost measuredLink_;
  bool yieldWhenWaiting_ = false;  // shm::Waiting::yield: this host's ranks outnumber its cores
  bool allShared_ = false;
  bool pullsEverywhere_ = false;
  // The segment of the channels toward this rank: a page with its doorbell and a probe word
  // (peers read it to learn whether they can read this rank's memory), then a channel from each
  // peer on shared memory, then a point-to-point channel from each.
  static constexpr size_t kProbeOffset = shm::Doorbell::kBytes;
  static constexpr uint64_t kProbe = 0x6562'6f72'7064'3031;  // "10dprobe" in memory
  static constexpr size_t channelOffset(size_t index) {
    return 4096 + index * shm::Channel::bytesFor(kChannelBytes);
  }
  static constexpr size_t p2pChannelOffset(size_t index, size_t peers) {
    return channelOffset(peers) + index * shm::Channel::bytesFor(kP2PChannelBytes);
  }
  static constexpr size_t segmentBytes(size_t peers) { return p2pChannelOffset(peers, peers); }
  shm::Segment inbound_;
  std::vector<shm::Segment> outbound_;  // peers' segments, mapped for their channel from us
  std::vector<uint8_t> scratch_;
  WireCall call_;
  // The call before (none until the second): a peer still in it when this rank has moved on
  // (this rank's part of it only sent) shows where the ranks really parted.
  std::optional<WireCall> previous_;
};

}  // namespace c10d::inline v1
