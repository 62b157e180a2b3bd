#include "store/tcp/StoreConnection.hpp"

#include <cstring>

#include "c10d/core/Exception.hpp"
#include "c10d/net/Auth.hpp"

namespace c10d::inline v1::detail {

StoreConnection::StoreConnection(const std::string& host, uint16_t port,
                                 std::chrono::milliseconds timeout,
                                 std::optional<std::string> token)
    : socket_(host, port, timeout, "TCPStore server",
              "Check that the store server (rank 0 or c10d-store-server) is running and that "
              "MASTER_ADDR/MASTER_PORT point at it."),
      token_(std::move(token)) {
  // The handshake's deadline is the connect timeout again: the server answers at once.
  handshake(Clock::now() + timeout);
}

void StoreConnection::handshake(Clock::time_point deadline) {
  const auto hello = protocol::clientHello();
  socket_.sendAll(hello.data(), hello.size(), deadline);
  const uint8_t* reply = socket_.receive(protocol::kHandshakeBytes, deadline);
  if (std::memcmp(reply, protocol::kMagic, 4) != 0) {
    fail("the peer is not a c10d TCPStore server (bad handshake)");
  }
  uint16_t serverVersion, status;
  std::memcpy(&serverVersion, reply + 4, 2);
  std::memcpy(&status, reply + 6, 2);
  if (status == static_cast<uint16_t>(protocol::HandshakeStatus::AuthChallenge)) {
    authenticate(deadline);
    return;
  }
  if (status != static_cast<uint16_t>(protocol::HandshakeStatus::Ok)) {
    fail(concat("the server speaks store protocol version ", serverVersion,
                " and this client version ", protocol::kVersion,
                "; run the same c10d version on every rank"));
  }
  if (token_) {
    fail(
        "this client has an authentication token (C10D_AUTH_TOKEN) but the server does not ask "
        "for one; refusing to talk to a server that does not authenticate. Start the server "
        "with the same token");
  }
}

void StoreConnection::authenticate(Clock::time_point deadline) {
  auth::Nonce challenge;
  std::memcpy(challenge.data(), socket_.receive(auth::kNonceBytes, deadline), challenge.size());
  if (!token_) {
    fail(
        "the server requires authentication: set C10D_AUTH_TOKEN (or C10D_AUTH_TOKEN_FILE) to "
        "the job's token");
  }
  auth::Nonce ours = auth::randomNonce();
  auth::Proof proof = auth::prove(*token_, protocol::kClientProofRole, challenge, ours);
  std::vector<uint8_t> message(ours.begin(), ours.end());
  message.insert(message.end(), proof.begin(), proof.end());
  socket_.sendAll(message.data(), message.size(), deadline);
  const uint8_t* answer;
  try {
    answer = socket_.receive(auth::kProofBytes, deadline);
  } catch (const StoreError&) {
    fail(
        "the server refused this client's authentication token (C10D_AUTH_TOKEN differs from "
        "the server's)");
  }
  if (!auth::matches(auth::prove(*token_, protocol::kServerProofRole, ours, challenge), answer)) {
    fail("the server's authentication proof is wrong: it does not hold this job's token");
  }
}

void StoreConnection::roundTrip(const std::vector<uint8_t>& request, std::vector<uint8_t>& response,
                                Clock::time_point deadline) {
  if (socket_.broken()) {
    C10D_THROW(StoreError, "connection to ", socket_.peer(),
               " is unusable: ", socket_.brokenReason());
  }
  socket_.sendAll(request.data(), request.size(), deadline);
  uint32_t length;
  std::memcpy(&length, socket_.receive(protocol::kFrameHeaderBytes, deadline), sizeof(length));
  if (length == 0 || length > protocol::kMaxFrameBytes) {
    fail(concat("received a frame of ", length, " bytes from the server"));
  }
  const uint8_t* body = socket_.receive(length, deadline);
  response.assign(body, body + length);
}

void StoreConnection::fail(const std::string& what) {
  socket_.fail(what);
}

}  // namespace c10d::inline v1::detail
