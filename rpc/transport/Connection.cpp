// Transport::Impl's reading and writing of one connection: the read callbacks that reassemble
// frames, and the writes, from the sending thread when nothing is queued, else from the loop
// thread, in order either way.

#include "rpc/transport/Connection.hpp"

#include <sys/socket.h>
#include <sys/uio.h>
#include <uv.h>

#include <cerrno>
#include <climits>

#include <algorithm>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "c10d/core/Exception.hpp"
#include "c10d/core/Logging.hpp"
#include "c10d/net/UvLoop.hpp"
#include "rpc/transport/Transport.hpp"
#include "rpc/transport/TransportImpl.hpp"
#include "rpc/transport/Wire.hpp"

namespace c10d::inline v1::rpc {

namespace {

// Frames up to this size are written by the sending thread when nothing is queued; larger
// ones go to the loop thread (written from the sender, large echoes ran slower; measured:
// docs/performance-history.md, "Figures that lived in code comments").
constexpr size_t kDirectWriteBytes = 256 * 1024;

using c10d::detail::uvError;
using detail::kDirectReadBytes;
using detail::Refused;

struct Write {
  uv_write_t request;  // first
  std::vector<detail::Outgoing> frames;
  detail::Connection* connection;
};

}  // namespace

void Transport::Impl::startReading(Connection* c) {
  uv_read_start(
      reinterpret_cast<uv_stream_t*>(&c->handle),
      [](uv_handle_t* handle, size_t, uv_buf_t* buf) {
        auto* c = static_cast<Connection*>(handle->data);
        auto [where, want] = c->reader.want();
        if (want >= kDirectReadBytes) {
          c->stagingInUse = false;
          *buf = uv_buf_init(where, static_cast<unsigned>(std::min<size_t>(want, 1u << 30)));
        } else {
          c->stagingInUse = true;
          *buf = uv_buf_init(c->staging.data(), static_cast<unsigned>(c->staging.size()));
        }
      },
      [](uv_stream_t* stream, ssize_t nread, const uv_buf_t*) {
        auto* c = static_cast<Connection*>(stream->data);
        c->impl->markBusy();
        if (nread == 0) return;
        if (nread < 0) {
          c->impl->drop(c, nread == UV_EOF ? "the peer closed the connection"
                                           : "read failed: " + uvError(static_cast<int>(nread)));
          return;
        }
        try {
          if (!c->stagingInUse) {
            if (auto frame = c->reader.filled(static_cast<size_t>(nread))) {
              c->impl->deliver(c, std::move(*frame));
            }
            return;
          }
          size_t offset = 0;
          auto left = static_cast<size_t>(nread);
          while (left > 0 && !c->isClosing()) {
            auto [where, want] = c->reader.want();
            size_t n = std::min(want, left);
            std::memcpy(where, c->staging.data() + offset, n);
            offset += n;
            left -= n;
            if (auto frame = c->reader.filled(n)) c->impl->deliver(c, std::move(*frame));
          }
        } catch (const Refused& e) {
          C10D_LOG(Warning, "rpc worker ", c->impl->self, ": ", e.what());
          c->impl->refuse(c, e.what());
        } catch (const std::exception& e) {
          C10D_LOG(Warning, "rpc worker ", c->impl->self, ": dropping the connection from ",
                   c->peer >= 0 ? "worker " + std::to_string(c->peer) : std::string("a peer"), ": ",
                   e.what());
          c->impl->drop(c, std::string("malformed frame: ") + e.what());
        }
      });
}

void Transport::Impl::writeOrQueue(const std::shared_ptr<Connection>& c, int peer, Frame frame,
                                   bool moreSoon) {
  // A peer that reads our memory gets the large tensors lent: their addresses in the head, the
  // tensors held under the loan until it has copied them.
  uint64_t loan = 0;
  detail::Loan lent;
  if (c->lendsToPeer.load(std::memory_order_acquire) &&
      std::any_of(frame.tensors.begin(), frame.tensors.end(), lendable)) {
    do {
      loan = (c->lastLoan.fetch_add(1, std::memory_order_relaxed) + 1) ^ c->loanKey;
    } while (loan == 0);
    lent.seal = std::make_unique<std::atomic<uint64_t>>(loan);
  }
  std::string head = encodeHead(frame, loan, reinterpret_cast<uintptr_t>(lent.seal.get()));
  if (loan != 0) {
    auto firstLent = std::stable_partition(frame.tensors.begin(), frame.tensors.end(),
                                           [](const Tensor& t) { return !lendable(t); });
    lent.tensors.assign(std::make_move_iterator(firstLent),
                        std::make_move_iterator(frame.tensors.end()));
    frame.tensors.erase(firstLent, frame.tensors.end());
  }
  size_t frameBytes = head.size();
  for (const Tensor& t : frame.tensors) frameBytes += t.nbytes();
  size_t written = 0;
  {
    std::lock_guard<std::mutex> guard(c->writeMutex);
    if (c->closing) throw PeerLostError(peer, c->closingWhy);
    // Before a byte goes out: the peer may answer Returned(loan) at once.
    if (loan != 0) c->loans.emplace(loan, std::move(lent));
    if (!moreSoon && c->queuedWrites == 0 && frameBytes <= kDirectWriteBytes) {
      // Nothing queued and a small frame: write on this thread, which saves a hand-off to the
      // loop thread (measured: docs/performance-history.md, "Figures that lived in code
      // comments"). The socket is non-blocking; what does not fit goes to the loop.
      std::vector<iovec> parts;
      parts.reserve(1 + frame.tensors.size());
      parts.push_back({head.data(), head.size()});
      for (const Tensor& t : frame.tensors) {
        if (t.nbytes() != 0) parts.push_back({t.data(), t.nbytes()});
      }
      int count = static_cast<int>(std::min<size_t>(parts.size(), IOV_MAX));
      ssize_t n;
      msghdr message{};
      message.msg_iov = parts.data();
      message.msg_iovlen = static_cast<size_t>(count);
      do {
        // MSG_NOSIGNAL: a peer that has gone must not kill the caller's process with SIGPIPE.
        n = ::sendmsg(c->fd, &message, MSG_NOSIGNAL);
      } while (n < 0 && errno == EINTR);
      if (n > 0) written = static_cast<size_t>(n);
      if (written == frameBytes) return;
      // Full socket buffer or an error: the loop writes the rest (libuv reports errors).
    }
    c->outbox.push_back(Outgoing{std::move(head), std::move(frame.tensors), written});
    // The first frame in the outbox schedules its flush; later ones join that write.
    if (c->outbox.size() > 1) return;
    ++c->queuedWrites;
  }
  scheduleFlush(c);
}

void Transport::Impl::sendOnLoop(Connection* c, const Frame& frame) {
  {
    std::lock_guard<std::mutex> guard(c->writeMutex);
    ++c->queuedWrites;
  }
  std::vector<Outgoing> frames;
  frames.push_back(Outgoing{encodeHead(frame), {}, 0});
  write(c, std::move(frames));
}

void Transport::Impl::flush(Connection* c) {
  std::vector<Outgoing> frames;
  {
    std::lock_guard<std::mutex> guard(c->writeMutex);
    frames.swap(c->outbox);
  }
  write(c, std::move(frames));
}

void Transport::Impl::writeDone(Connection* c) {
  std::lock_guard<std::mutex> guard(c->writeMutex);
  --c->queuedWrites;
}

void Transport::Impl::write(Connection* c, std::vector<Outgoing> frames) {
  if (c->isClosing()) {
    writeDone(c);
    return;
  }
  auto* w = new Write();
  w->frames = std::move(frames);
  w->connection = c;
  std::vector<uv_buf_t> bufs;
  for (Outgoing& frame : w->frames) {
    size_t skip = frame.skip;
    auto add = [&](char* data, size_t size) {
      if (skip >= size) {
        skip -= size;
        return;
      }
      bufs.push_back(uv_buf_init(data + skip, static_cast<unsigned>(size - skip)));
      skip = 0;
    };
    add(frame.head.data(), frame.head.size());
    for (const Tensor& t : frame.tensors) add(static_cast<char*>(t.data()), t.nbytes());
  }
  if (bufs.empty()) {
    delete w;
    writeDone(c);
    return;
  }
  int rc = uv_write(&w->request, reinterpret_cast<uv_stream_t*>(&c->handle), bufs.data(),
                    static_cast<unsigned>(bufs.size()), [](uv_write_t* request, int status) {
                      auto* w = reinterpret_cast<Write*>(request);
                      Connection* c = w->connection;
                      delete w;
                      writeDone(c);
                      if (status < 0 && status != UV_ECANCELED) {
                        c->impl->drop(c, "write failed: " + uvError(status));
                      }
                    });
  if (rc < 0) {
    delete w;
    writeDone(c);
    drop(c, "write failed: " + uvError(rc));
  }
}

}  // namespace c10d::inline v1::rpc
