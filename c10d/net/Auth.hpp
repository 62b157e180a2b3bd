#pragma once

/// \file
/// Shared-secret authentication of TCPStore and RPC connections: the token, nonces and
/// HMAC-SHA256 proofs.
///
/// Shared-secret authentication for the TCPStore and RPC connections.
///
/// Both ends hold the same token. The accepting side sends a random challenge; each side then
/// proves it knows the token by an HMAC-SHA256 over both sides' nonces and its role, so neither a
/// recorded proof nor one side's proof replayed as the other's is accepted. The token itself never
/// crosses the wire. The exchanges are spelled out in docs/store-protocol.md and rpc/README.md.
///
/// Thread-safe: every function here may be called from any thread.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

/// Shared-secret authentication for the TCPStore and RPC connections: both ends prove they hold
/// the job's token by an HMAC-SHA256 over both sides' nonces, without sending it. Thread-safe.
namespace c10d::inline v1::auth {

inline constexpr size_t kNonceBytes = 32;  ///< the size of a Nonce
inline constexpr size_t kProofBytes = 32;  ///< HMAC-SHA256
using Nonce = std::array<uint8_t, kNonceBytes>;  ///< a random challenge, one per side and exchange
using Proof = std::array<uint8_t, kProofBytes>;  ///< an HMAC-SHA256 that proves the token is held

/// The job's token: C10D_AUTH_TOKEN, else the first line of the file named by
/// C10D_AUTH_TOKEN_FILE, else none. Throws InvalidArgument when the file cannot be read or the
/// token it names is empty (an empty secret would authenticate anyone).
/// \return The token (a trailing '\\r' of the file's line removed), or nullopt when neither
///         variable is set.
/// \throws InvalidArgument when C10D_AUTH_TOKEN_FILE's file cannot be read or holds an empty
///         first line.
std::optional<std::string> tokenFromEnvironment();

/// explicitToken when set (an empty one is an error), else tokenFromEnvironment().
/// \param explicitToken A token the program gave (store or RPC options); nullopt: none.
/// \return The token to use, or nullopt for no authentication.
/// \throws InvalidArgument when explicitToken is empty, or as tokenFromEnvironment() does.
std::optional<std::string> resolveToken(const std::optional<std::string>& explicitToken);

/// A nonce from OpenSSL's CSPRNG. Throws Error if the generator fails.
/// \return kNonceBytes random bytes.
/// \throws Error when OpenSSL's generator fails.
Nonce randomNonce();

/// HMAC-SHA256(token, role || first || second). role separates the two directions of one
/// exchange, and the store's exchange from RPC's.
/// \param token The shared secret, the HMAC's key.
/// \param role Names the side and the protocol; the two ends must use the same strings.
/// \param first The first nonce in the message.
/// \param second The second nonce in the message.
/// \return The HMAC.
/// \throws Error when OpenSSL's HMAC fails.
Proof prove(std::string_view token, std::string_view role, const Nonce& first, const Nonce& second);

/// Constant-time comparison of a received proof with the expected one.
/// \param expected The proof computed here with prove().
/// \param received kProofBytes bytes from the peer (must all be readable).
/// \return Whether they are equal.
bool matches(const Proof& expected, const uint8_t* received);

}  // namespace c10d::inline v1::auth
