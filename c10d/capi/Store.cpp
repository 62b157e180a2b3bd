// The C API's stores: TCP, file, hash and prefix stores over the C++ ones.

#include <cstring>
#include <string>
#include <vector>

#include "c10d/capi/Handles.hpp"
#include "store/FileStore.hpp"
#include "store/HashStore.hpp"
#include "store/PrefixStore.hpp"
#include "store/TCPStore.hpp"

using namespace c10d;
using namespace c10d::capi;

namespace {

std::string keyOf(const char* key, const char* call) {
  C10D_CHECK(key != nullptr, InvalidArgument, call, ": key is NULL");
  return key;
}

std::vector<std::string> keysOf(const char* const* keys, size_t count, const char* call) {
  C10D_CHECK(keys != nullptr || count == 0, InvalidArgument, call, ": keys is NULL with ", count,
             " keys");
  std::vector<std::string> out;
  out.reserve(count);
  for (size_t i = 0; i < count; ++i) {
    C10D_CHECK(keys[i] != nullptr, InvalidArgument, call, ": keys[", i, "] is NULL");
    out.emplace_back(keys[i]);
  }
  return out;
}

Store::Bytes bytesOf(const void* data, size_t size, const char* call, const char* what) {
  C10D_CHECK(data != nullptr || size == 0, InvalidArgument, call, ": ", what, " is NULL with size ",
             size);
  auto* begin = static_cast<const uint8_t*>(data);
  return Store::Bytes(begin, begin + size);
}

std::chrono::milliseconds storeTimeout(Store& store, int64_t timeoutMs) {
  return timeoutMs < 0 ? store.timeout() : std::chrono::milliseconds(timeoutMs);
}

}  // namespace

c10d_store* c10d::capi::storeHandle(std::shared_ptr<Store> store) {
  uint16_t port = 0;
  if (auto* tcp = dynamic_cast<TCPStore*>(store.get())) port = tcp->port();
  return new c10d_store{std::move(store), port};
}

extern "C" {

c10d_status c10d_store_tcp(const c10d_tcp_store_options* options, c10d_store** out) {
  return guarded([&] {
    const char* call = "c10d_store_tcp";
    C10D_CHECK(checkOptions(options, call), InvalidArgument, call,
               ": options is NULL; start from C10D_TCP_STORE_OPTIONS_INIT");
    outOf(out, call);
    C10D_CHECK(options->host != nullptr, InvalidArgument, call, ": options->host is NULL");
    C10D_CHECK(options->timeout_ms > 0, InvalidArgument, call, ": options->timeout_ms is ",
               options->timeout_ms, "; it must be positive");
    TCPStoreOptions tcp;
    tcp.isServer = options->is_server != 0;
    if (options->wait_for_workers != 0) {
      C10D_CHECK(options->num_workers > 0, InvalidArgument, call,
                 ": wait_for_workers needs num_workers > 0, not ", options->num_workers);
      tcp.numWorkers = options->num_workers;
    }
    tcp.timeout = std::chrono::milliseconds(options->timeout_ms);
    *out = storeHandle(std::make_shared<TCPStore>(options->host, options->port, tcp));
  });
}

c10d_status c10d_store_file(const char* path, int num_workers, int64_t timeout_ms,
                            c10d_store** out) {
  return guarded([&] {
    const char* call = "c10d_store_file";
    C10D_CHECK(path != nullptr, InvalidArgument, call, ": path is NULL");
    C10D_CHECK(timeout_ms > 0, InvalidArgument, call, ": timeout_ms is ", timeout_ms,
               "; it must be positive");
    c10d_store*& slot = outOf(out, call);
    slot = new c10d_store{
        std::make_shared<FileStore>(path, num_workers, std::chrono::milliseconds(timeout_ms))};
  });
}

c10d_status c10d_store_hash(c10d_store** out) {
  return guarded([&] {
    c10d_store*& slot = outOf(out, "c10d_store_hash");
    slot = new c10d_store{std::make_shared<HashStore>()};
  });
}

c10d_status c10d_store_prefix(const char* prefix, c10d_store* base, c10d_store** out) {
  return guarded([&] {
    const char* call = "c10d_store_prefix";
    C10D_CHECK(prefix != nullptr, InvalidArgument, call, ": prefix is NULL");
    c10d_store& under = deref(base, call, "base");
    c10d_store*& slot = outOf(out, call);
    slot = new c10d_store{std::make_shared<PrefixStore>(prefix, under.store), under.port};
  });
}

c10d_status c10d_store_port(c10d_store* store, uint16_t* port) {
  return guarded([&] {
    c10d_store& s = deref(store, "c10d_store_port", "store");
    C10D_CHECK(s.port != 0, InvalidArgument, "c10d_store_port: not a TCP store");
    outOf(port, "c10d_store_port") = s.port;
  });
}

c10d_status c10d_store_set(c10d_store* store, const char* key, const void* value, size_t size) {
  return guarded([&] {
    const char* call = "c10d_store_set";
    deref(store, call, "store").store->set(keyOf(key, call), bytesOf(value, size, call, "value"));
  });
}

c10d_status c10d_store_get(c10d_store* store, const char* key, int64_t timeout_ms,
                           c10d_bytes* value) {
  return guarded([&] {
    const char* call = "c10d_store_get";
    Store& s = *deref(store, call, "store").store;
    c10d_bytes& result = outOf(value, call);
    Store::Bytes bytes = s.get(keyOf(key, call), storeTimeout(s, timeout_ms));
    result = copyOut(bytes.data(), bytes.size());
  });
}

c10d_status c10d_store_queue_push(c10d_store* store, const char* key, const void* value,
                                  size_t size) {
  return guarded([&] {
    const char* call = "c10d_store_queue_push";
    deref(store, call, "store")
        .store->queuePush(keyOf(key, call), bytesOf(value, size, call, "value"));
  });
}

c10d_status c10d_store_queue_pop(c10d_store* store, const char* key, int64_t timeout_ms,
                                 c10d_bytes* value, int* popped) {
  return guarded([&] {
    const char* call = "c10d_store_queue_pop";
    Store& s = *deref(store, call, "store").store;
    c10d_bytes& result = outOf(value, call);
    C10D_CHECK(timeout_ms != 0 || popped != nullptr, InvalidArgument, call,
               ": popped is NULL with timeout_ms 0 (the only way to tell an empty queue)");
    std::optional<Store::Bytes> bytes;
    if (timeout_ms == 0) {
      bytes = s.tryQueuePop(keyOf(key, call));
    } else {
      bytes = s.queuePop(keyOf(key, call), storeTimeout(s, timeout_ms));
    }
    if (popped != nullptr) *popped = bytes.has_value() ? 1 : 0;
    result = bytes ? copyOut(bytes->data(), bytes->size()) : copyOut(nullptr, 0);
  });
}

c10d_status c10d_store_queue_len(c10d_store* store, const char* key, int64_t* length) {
  return guarded([&] {
    const char* call = "c10d_store_queue_len";
    int64_t n = deref(store, call, "store").store->queueLen(keyOf(key, call));
    outOf(length, call) = n;
  });
}

c10d_status c10d_store_add(c10d_store* store, const char* key, int64_t delta, int64_t* result) {
  return guarded([&] {
    const char* call = "c10d_store_add";
    int64_t sum = deref(store, call, "store").store->add(keyOf(key, call), delta);
    if (result != nullptr) *result = sum;
  });
}

c10d_status c10d_store_compare_set(c10d_store* store, const char* key, const void* expected,
                                   size_t expected_size, const void* desired, size_t desired_size,
                                   c10d_bytes* result) {
  return guarded([&] {
    const char* call = "c10d_store_compare_set";
    Store& s = *deref(store, call, "store").store;
    c10d_bytes& out = outOf(result, call);
    Store::Bytes now =
        s.compareSet(keyOf(key, call), bytesOf(expected, expected_size, call, "expected"),
                     bytesOf(desired, desired_size, call, "desired"));
    out = copyOut(now.data(), now.size());
  });
}

c10d_status c10d_store_wait(c10d_store* store, const char* const* keys, size_t num_keys,
                            int64_t timeout_ms) {
  return guarded([&] {
    const char* call = "c10d_store_wait";
    Store& s = *deref(store, call, "store").store;
    s.wait(keysOf(keys, num_keys, call), storeTimeout(s, timeout_ms));
  });
}

c10d_status c10d_store_check(c10d_store* store, const char* const* keys, size_t num_keys,
                             int* all_exist) {
  return guarded([&] {
    const char* call = "c10d_store_check";
    Store& s = *deref(store, call, "store").store;
    int& out = outOf(all_exist, call);
    out = s.check(keysOf(keys, num_keys, call)) ? 1 : 0;
  });
}

c10d_status c10d_store_delete(c10d_store* store, const char* key, int* existed) {
  return guarded([&] {
    const char* call = "c10d_store_delete";
    bool had = deref(store, call, "store").store->deleteKey(keyOf(key, call));
    if (existed != nullptr) *existed = had ? 1 : 0;
  });
}

c10d_status c10d_store_num_keys(c10d_store* store, int64_t* count) {
  return guarded([&] {
    const char* call = "c10d_store_num_keys";
    Store& s = *deref(store, call, "store").store;
    outOf(count, call) = s.numKeys();
  });
}

c10d_status c10d_store_timeout(c10d_store* store, int64_t* timeout_ms) {
  return guarded([&] {
    const char* call = "c10d_store_timeout";
    Store& s = *deref(store, call, "store").store;
    outOf(timeout_ms, call) = s.timeout().count();
  });
}

c10d_status c10d_store_set_timeout(c10d_store* store, int64_t timeout_ms) {
  return guarded([&] {
    deref(store, "c10d_store_set_timeout", "store")
        .store->setTimeout(std::chrono::milliseconds(timeout_ms));
  });
}

void c10d_store_free(c10d_store* store) {
  delete store;
}

}  // extern "C"
