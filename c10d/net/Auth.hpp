#pragma once

// Shared-secret authentication for the TCPStore and RPC connections.
//
// Both ends hold the same token. The accepting side sends a random challenge; each side then
// proves it knows the token by an HMAC-SHA256 over both sides' nonces and its role, so neither a
// recorded proof nor one side's proof replayed as the other's is accepted. The token itself never
// crosses the wire. The exchanges are spelled out in docs/store-protocol.md and rpc/README.md.
//
// Thread-safe: every function here may be called from any thread.

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace c10d::inline v1::auth {

inline constexpr size_t kNonceBytes = 32;
inline constexpr size_t kProofBytes = 32;  ///< HMAC-SHA256
using Nonce = std::array<uint8_t, kNonceBytes>;
using Proof = std::array<uint8_t, kProofBytes>;

/// The job's token: C10D_AUTH_TOKEN, else the first line of the file named by
/// C10D_AUTH_TOKEN_FILE, else none. Throws InvalidArgument when the file cannot be read or the
/// token it names is empty (an empty secret would authenticate anyone).
std::optional<std::string> tokenFromEnvironment();

/// explicitToken when set (an empty one is an error), else tokenFromEnvironment().
std::optional<std::string> resolveToken(const std::optional<std::string>& explicitToken);

/// A nonce from OpenSSL's CSPRNG. Throws Error if the generator fails.
Nonce randomNonce();

/// HMAC-SHA256(token, role || first || second). role separates the two directions of one
/// exchange, and the store's exchange from RPC's.
Proof prove(std::string_view token, std::string_view role, const Nonce& first, const Nonce& second);

/// Constant-time comparison of a received proof with the expected one.
bool matches(const Proof& expected, const uint8_t* received);

}  // namespace c10d::inline v1::auth
