#include "c10d/backends/gloo/SyncMesh.hpp"

#include <gloo/transport/pair.h>

#include <cstring>

#include "c10d/Exception.hpp"

namespace c10d {

SyncMesh::SyncMesh(std::shared_ptr<gloo::rendezvous::Context> context, bool busyPoll)
    : context_(std::move(context)), rank_(context_->rank), size_(context_->size), peers_(size_) {
  for (int peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    auto& pair = context_->getPair(peer);
    pair->setSync(true, busyPoll);
    Peer& p = peers_[peer];
    p.sendStage.resize(kStageBytes);
    p.recvStage.resize(kStageBytes);
    // One slot per pair: this context carries nothing else, and a pair delivers in order.
    p.sendBuffer = pair->createSendBuffer(0, p.sendStage.data(), kStageBytes);
    p.recvBuffer = pair->createRecvBuffer(0, p.recvStage.data(), kStageBytes);
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
  if (bytes > 0) std::memcpy(p.sendStage.data(), data, bytes);
  // A zero-length message still travels: the receiver's read is what completes its wait.
  p.sendBuffer->send(0, bytes, 0);
  p.sendBuffer->waitSend();
}

void SyncMesh::recv(int peer, void* data, size_t bytes) {
  Peer& p = peers_[peer];
  p.recvBuffer->waitRecv();
  if (bytes > 0) std::memcpy(data, p.recvStage.data(), bytes);
}

void SyncMesh::exchange(int to, const void* sendData, int from, void* recvData, size_t bytes) {
  send(to, sendData, bytes);
  recv(from, recvData, bytes);
}

// Recursive doubling among the largest power of two p' <= size; the size - p' ranks above it
// first fold their data into a partner below and get the result back at the end. Partners
// combine each other's data in the same order, so every rank ends with identical bits.
void SyncMesh::allreduce(void* data, size_t count, size_t elementSize, ReduceFunction reduce) {
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
    exchange(partner, data, partner, incoming, bytes);
    // The lower rank's data goes first on both sides.
    if (partner < rank_) {
      reduce(data, incoming, data, count);
    } else {
      reduce(data, data, incoming, count);
    }
  }
  if (rank_ < extra) send(rank_ + pow2, data, bytes);
}

// Binomial tree toward root over ranks relative to it.
void SyncMesh::reduce(void* data, size_t count, size_t elementSize, ReduceFunction reduceFn,
                      int root) {
  const size_t bytes = count * elementSize;
  const int relative = (rank_ - root + size_) % size_;
  uint8_t* incoming = scratch_.data();
  for (int mask = 1; mask < size_; mask *= 2) {
    if (relative & mask) {
      send((relative - mask + root) % size_, data, bytes);
      return;
    }
    int child = relative + mask;
    if (child < size_) {
      recv((child + root) % size_, incoming, bytes);
      reduceFn(data, data, incoming, count);
    }
  }
}

void SyncMesh::broadcast(void* data, size_t bytes, int root) {
  const int relative = (rank_ - root + size_) % size_;
  int mask = 1;
  while (mask < size_) {
    if (relative & mask) {
      recv((relative - mask + root) % size_, data, bytes);
      break;
    }
    mask *= 2;
  }
  for (mask /= 2; mask > 0; mask /= 2) {
    if (relative + mask < size_) send((relative + mask + root) % size_, data, bytes);
  }
}

// Ring: in step s every rank passes the block it received last to its right neighbour.
void SyncMesh::allgather(void* output, size_t bytes) {
  auto* blocks = static_cast<uint8_t*>(output);
  const int right = (rank_ + 1) % size_;
  const int left = (rank_ - 1 + size_) % size_;
  for (int step = 0; step < size_ - 1; ++step) {
    int sendBlock = (rank_ - step + size_) % size_;
    int recvBlock = (rank_ - step - 1 + size_) % size_;
    exchange(right, blocks + sendBlock * bytes, left, blocks + recvBlock * bytes, bytes);
  }
}

// Pairwise: in step s, send to rank + s and receive from rank - s.
void SyncMesh::alltoall(const void* input, void* output, size_t blockBytes) {
  const auto* in = static_cast<const uint8_t*>(input);
  auto* out = static_cast<uint8_t*>(output);
  std::memcpy(out + rank_ * blockBytes, in + rank_ * blockBytes, blockBytes);
  for (int step = 1; step < size_; ++step) {
    int to = (rank_ + step) % size_;
    int from = (rank_ - step + size_) % size_;
    exchange(to, in + to * blockBytes, from, out + from * blockBytes, blockBytes);
  }
}

// Dissemination: after round k every rank has heard, directly or not, from 2^(k+1) ranks.
void SyncMesh::barrier() {
  uint8_t token = 0;
  for (int distance = 1; distance < size_; distance *= 2) {
    exchange((rank_ + distance) % size_, &token, (rank_ - distance + size_) % size_, &token, 1);
  }
}

}  // namespace c10d
