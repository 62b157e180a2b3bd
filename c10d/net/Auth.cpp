#include "c10d/net/Auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <fstream>

#include "c10d/core/Config.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v1::auth {

std::optional<std::string> tokenFromEnvironment() {
  if (auto token = config::Settings().given("C10D_AUTH_TOKEN")) return token;
  std::string path = config::value("C10D_AUTH_TOKEN_FILE");
  if (path.empty()) return std::nullopt;
  std::ifstream file(path);
  C10D_CHECK(file.good(), InvalidArgument, "C10D_AUTH_TOKEN_FILE names '", path,
             "', which cannot be read");
  std::string token;
  std::getline(file, token);
  if (!token.empty() && token.back() == '\r') token.pop_back();
  C10D_CHECK(!token.empty(), InvalidArgument, "C10D_AUTH_TOKEN_FILE '", path,
             "' holds an empty token");
  return token;
}

std::optional<std::string> resolveToken(const std::optional<std::string>& explicitToken) {
  if (!explicitToken) return tokenFromEnvironment();
  C10D_CHECK(!explicitToken->empty(), InvalidArgument, "an authentication token must not be empty");
  return explicitToken;
}

Nonce randomNonce() {
  Nonce nonce;
  C10D_CHECK(RAND_bytes(nonce.data(), static_cast<int>(nonce.size())) == 1, Error,
             "authentication: OpenSSL's random generator failed");
  return nonce;
}

Proof prove(std::string_view token, std::string_view role, const Nonce& first,
            const Nonce& second) {
  std::string message(role);
  message.append(reinterpret_cast<const char*>(first.data()), first.size());
  message.append(reinterpret_cast<const char*>(second.data()), second.size());
  Proof proof;
  unsigned length = 0;
  const unsigned char* mac = HMAC(EVP_sha256(), token.data(), static_cast<int>(token.size()),
                                  reinterpret_cast<const unsigned char*>(message.data()),
                                  message.size(), proof.data(), &length);
  C10D_CHECK(mac != nullptr && length == proof.size(), Error, "authentication: HMAC-SHA256 failed");
  return proof;
}

bool matches(const Proof& expected, const uint8_t* received) {
  return CRYPTO_memcmp(expected.data(), received, expected.size()) == 0;
}

}  // namespace c10d::inline v1::auth
