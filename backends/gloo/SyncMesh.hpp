#pragma once

// Private to backends/gloo. The small-message fast path: a second Gloo context whose pairs run
// in Gloo's synchronous mode, so a message is one blocking write on the sender's thread and one
// blocking read on the receiver's, with no device-thread hand-off and no send/recv rendezvous
// round trip (what Gloo's unbound buffers cost per message).

#include <gloo/rendezvous/context.h>
#include <gloo/transport/buffer.h>

#include <memory>
#include <optional>
#include <vector>

#include "backends/common/Reduce.hpp"
#include "backends/gloo/WireCall.hpp"

namespace c10d::inline v0 {

class SyncMesh {
 public:
  // Messages up to this size are safe to send from both ends of a pair at once: the kernel's
  // socket buffers hold them, so neither blocking write waits for the other side to read.
  // The staging buffers are twice as large: the construction sends one message that big on
  // every pair, which makes Gloo size the sockets' send buffers once, with room to spare. (A
  // send buffer sized to the message made the write wait for an ACK the peer delays by 40 ms.)
  static constexpr size_t kMaxMessageBytes = 256 * 1024;
  static constexpr size_t kStageBytes = 2 * kMaxMessageBytes;
  static constexpr size_t kHeaderBytes = sizeof(WireCall);

  // Switches every pair of context (already connected) to sync mode; busyPoll spins on reads
  // instead of sleeping (only sensible with a core per rank).
  SyncMesh(std::shared_ptr<gloo::rendezvous::Context> context, bool busyPoll);

  // The call that the next messages carry, and that messages received must match (see
  // WireCall.hpp); with WireCall::kAgreeing, received ones need only be agreeing too.
  void setCall(const WireCall& call) {
    if (call.seq != call_.seq) previous_ = call_;
    call_ = call;
  }

  int rank() const { return rank_; }
  int size() const { return size_; }
  gloo::rendezvous::Context& context() const { return *context_; }

  // Blocking point-to-point messages of at most kMaxMessageBytes, after the call's header. recv
  // throws WireMismatch for a message of another call or size, before it uses its payload.
  void send(int peer, const void* data, size_t bytes);
  void recv(int peer, void* data, size_t bytes);

  // Collectives over whole buffers of any size; larger ones travel in kMaxMessageBytes pieces.
  // allreduce: recursive doubling up to kMaxMessageBytes (fewest steps), a ring beyond (fewest
  // bytes per rank).
  void allreduce(void* data, size_t count, size_t elementSize, ReduceFunction reduce);
  // data holds size() blocks of blockCount elements; afterwards block rank() is the reduction.
  void reduceScatter(void* data, size_t blockCount, size_t elementSize, ReduceFunction reduce);
  void reduce(void* data, size_t count, size_t elementSize, ReduceFunction reduce, int root);
  void broadcast(void* data, size_t bytes, int root);
  // output holds size() blocks of bytes; block rank() must already hold our input.
  void allgather(void* output, size_t bytes);
  // Block r of input goes to rank r; block r of output comes from rank r.
  void alltoall(const void* input, void* output, size_t blockBytes);
  void barrier();

 private:
  // What a message that contradicts call_ says, for the error.
  WireMismatch mismatch(int peer, const WireCall& header, bool sameCall,
                        size_t expectedBytes) const;
  void ringAllreduce(void* data, size_t count, size_t elementSize, ReduceFunction reduce);
  void ringPhase(uint8_t* base, size_t count, size_t segment, size_t elementSize, int shift,
                 ReduceFunction reduce);

  struct Peer {
    std::vector<uint8_t> sendStage, recvStage;
    std::unique_ptr<gloo::transport::Buffer> sendBuffer, recvBuffer;
  };

  std::shared_ptr<gloo::rendezvous::Context> context_;
  int rank_;
  int size_;
  std::vector<Peer> peers_;
  std::vector<uint8_t> scratch_;
  WireCall call_;
  // The call before (none until the second): a peer still in it when this rank has moved on
  // (this rank's part of it only sent) shows where the ranks really parted.
  std::optional<WireCall> previous_;
};

}  // namespace c10d::inline v0
