#include "backends/gloo/SyncMesh.hpp"

#include <gloo/transport/pair.h>

#include <algorithm>
#include <cstring>

#include "backends/gloo/GlooSetup.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v0 {

SyncMesh::SyncMesh(std::shared_ptr<gloo::rendezvous::Context> context, bool busyPoll)
    : context_(std::move(context)), rank_(context_->rank), size_(context_->size), peers_(size_) {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    auto& pair = context_->getPair(peer);
    pair->setSync(true, busyPoll);
    Peer& p = peers_[peer];
    p.sendStage.resize(kHeaderBytes + kStageBytes);
    p.recvStage.resize(kHeaderBytes + kStageBytes);
    // One slot per pair: this context carries nothing else, and a pair delivers in order.
    p.sendBuffer = pair->createSendBuffer(0, p.sendStage.data(), p.sendStage.size());
    p.recvBuffer = pair->createRecvBuffer(0, p.recvStage.data(), p.recvStage.size());
  }
  scratch_.resize(kStageBytes);
  // Size every socket's send buffer now (see kStageBytes). The lower rank of a pair sends first,
  // so no two blocking writes ever wait on each other.
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    if (rank_ < peer) {
      send(peer, scratch_.data(), kStageBytes);
      recv(peer, scratch_.data(), kStageBytes);
    } else {
      recv(peer, scratch_.data(), kStageBytes);
      send(peer, scratch_.data(), kStageBytes);
    }
  }
}

void SyncMesh::send(int peer, const void* data, size_t bytes) {
  Peer& p = peers_[peer];
  WireCall header = call_;
  header.payloadBytes = static_cast<uint32_t>(bytes);
  std::memcpy(p.sendStage.data(), &header, kHeaderBytes);
  if (bytes > 0) copyBytes(p.sendStage.data() + kHeaderBytes, data, bytes);
  p.sendBuffer->send(0, kHeaderBytes + bytes, 0);
  p.sendBuffer->waitSend();
}

void SyncMesh::recv(int peer, void* data, size_t bytes) {
  Peer& p = peers_[peer];
  p.recvBuffer->waitRecv();
  WireCall header;
  std::memcpy(&header, p.recvStage.data(), kHeaderBytes);
  const bool agreeing = call_.flags & WireCall::kAgreeing;
  const bool match = agreeing ? header.flags == call_.flags : header.sameCall(call_);
  if (!match || header.payloadBytes != bytes) throw mismatch(peer, header, match, bytes);
  if (bytes > 0) copyBytes(data, p.recvStage.data() + kHeaderBytes, bytes);
}

WireMismatch SyncMesh::mismatch(int peer, const WireCall& header, bool sameCall,
                                size_t expectedBytes) const {
  std::string why;
  if (header.flags != call_.flags) {
    why =
        " (one of them runs it over Gloo's own algorithm: do their per-op timeouts, sizes or "
        "C10D_GLOO_FAST_PATH differ?)";
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

void SyncMesh::allreduce(void* data, size_t count, size_t elementSize, ReduceFunction reduce) {
  if (count * elementSize > kMaxMessageBytes) {
    ringAllreduce(data, count, elementSize, reduce);
    return;
  }
  // Recursive doubling among the largest power of two p' <= size; the size - p' ranks above it
  // first fold their data into a partner below and get the result back at the end. Partners
  // combine each other's data in the same order, so every rank ends with identical bits.
  const size_t bytes = count * elementSize;
  int pow2 = 1;
  while (pow2 * 2 <= size_) pow2 *= 2;
  const int extra = size_ - pow2;
  uint8_t* incoming = scratch_.data();
  if (rank_ >= pow2) {
    send(rank_ - pow2, data, bytes);
    recv(rank_ - pow2, data, bytes);
    return;
  }
  if (rank_ < extra) {
    recv(rank_ + pow2, incoming, bytes);
    reduce(data, data, incoming, count);
  }
  for (int distance = 1; distance < pow2; distance *= 2) {
    int partner = rank_ ^ distance;
    send(partner, data, bytes);
    recv(partner, incoming, bytes);
    if (partner < rank_) {  // the lower rank's data goes first on both sides
      reduce(data, incoming, data, count);
    } else {
      reduce(data, data, incoming, count);
    }
  }
  if (rank_ < extra) send(rank_ + pow2, data, bytes);
}

// One phase of a ring over `count` elements cut in size() segments of `segment` elements. In
// step s rank r sends segment (r - s + shift) to its right and receives segment
// (r - s - 1 + shift) from its left. With reduce (reduce-scatter), what arrives is folded into
// our copy of that segment, and after size-1 steps we hold the full reduction of segment
// (r + shift + 1). Without it (allgather), what arrives replaces our copy, starting from the
// segment (r + shift) we own.
void SyncMesh::ringPhase(uint8_t* base, size_t count, size_t segment, size_t elementSize, int shift,
                         ReduceFunction reduce) {
  const int right = (rank_ + 1) % size_;
  const int left = (rank_ - 1 + size_) % size_;
  const size_t piece = kMaxMessageBytes / elementSize;
  auto begin = [&](int index) {
    return std::min(count, static_cast<size_t>((index % size_ + size_) % size_) * segment);
  };
  auto length = [&](int index) { return std::min(count, begin(index) + segment) - begin(index); };
  for (int step = 0; step < size_ - 1; ++step) {
    int sendIndex = rank_ - step + shift, recvIndex = rank_ - step - 1 + shift;
    size_t sendCount = length(sendIndex), recvCount = length(recvIndex);
    inPieces(std::max(sendCount, recvCount), piece, [&](size_t done, size_t) {
      size_t s = done < sendCount ? std::min(piece, sendCount - done) : 0;
      size_t r = done < recvCount ? std::min(piece, recvCount - done) : 0;
      uint8_t* target = base + (begin(recvIndex) + done) * elementSize;
      send(right, base + (begin(sendIndex) + done) * elementSize, s * elementSize);
      recv(left, reduce ? scratch_.data() : target, r * elementSize);
      if (reduce) reduce(target, scratch_.data(), target, r);
    });
  }
}

void SyncMesh::ringAllreduce(void* data, size_t count, size_t elementSize, ReduceFunction reduce) {
  auto* base = static_cast<uint8_t*>(data);
  const size_t segment = (count + size_ - 1) / size_;
  // Each segment's final value is computed once, by its owner, and then copied: identical bits
  // on every rank.
  ringPhase(base, count, segment, elementSize, 0, reduce);
  ringPhase(base, count, segment, elementSize, 1, nullptr);
}

void SyncMesh::reduceScatter(void* data, size_t blockCount, size_t elementSize,
                             ReduceFunction reduce) {
  // Shift -1 so that rank r ends up owning block r.
  ringPhase(static_cast<uint8_t*>(data), blockCount * size_, blockCount, elementSize, -1, reduce);
}

// Binomial tree toward root over ranks relative to it, piece by piece.
void SyncMesh::reduce(void* data, size_t count, size_t elementSize, ReduceFunction reduceFn,
                      int root) {
  const int relative = (rank_ - root + size_) % size_;
  uint8_t* incoming = scratch_.data();
  inPieces(count, kMaxMessageBytes / elementSize, [&](size_t offset, size_t n) {
    uint8_t* piece = static_cast<uint8_t*>(data) + offset * elementSize;
    for (int mask = 1; mask < size_; mask *= 2) {
      if (relative & mask) {
        send((relative - mask + root) % size_, piece, n * elementSize);
        return;
      }
      int child = relative + mask;
      if (child < size_) {
        recv((child + root) % size_, incoming, n * elementSize);
        reduceFn(piece, piece, incoming, n);
      }
    }
  });
}

// Binomial tree from root, piece by piece (each rank forwards a piece as soon as it has it).
void SyncMesh::broadcast(void* data, size_t bytes, int root) {
  const int relative = (rank_ - root + size_) % size_;
  int parentMask = 1;
  while (parentMask < size_ && !(relative & parentMask)) parentMask *= 2;
  inPieces(bytes, kMaxMessageBytes, [&](size_t offset, size_t n) {
    uint8_t* piece = static_cast<uint8_t*>(data) + offset;
    if (parentMask < size_) recv((relative - parentMask + root) % size_, piece, n);
    for (int mask = parentMask / 2; mask > 0; mask /= 2) {
      if (relative + mask < size_) send((relative + mask + root) % size_, piece, n);
    }
  });
}

void SyncMesh::allgather(void* output, size_t bytes) {
  ringPhase(static_cast<uint8_t*>(output), bytes * size_, bytes, 1, 0, nullptr);
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
