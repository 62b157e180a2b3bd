// The C API's object collectives over bytes (c10d.h), on c10d/ObjectCollectives.hpp.

#include <cstdlib>
#include <new>
#include <string>
#include <vector>

#include "c10d/ObjectCollectives.hpp"
#include "c10d/capi/Handles.hpp"

using namespace c10d;
using namespace c10d::capi;

namespace {

std::string bytesIn(const void* data, size_t size, const char* call) {
  C10D_CHECK(data != nullptr || size == 0, InvalidArgument, call, ": data is NULL with size ",
             size);
  return std::string(static_cast<const char*>(data), size);
}

// A malloc'ed array of copies, for c10d_free (each element's data, then the array).
c10d_bytes* listOut(const std::vector<std::string>& all) {
  auto* list = static_cast<c10d_bytes*>(std::calloc(all.size() + 1, sizeof(c10d_bytes)));
  if (list == nullptr) throw std::bad_alloc();
  try {
    for (size_t i = 0; i < all.size(); ++i) list[i] = copyOut(all[i].data(), all[i].size());
  } catch (...) {
    for (size_t i = 0; i < all.size(); ++i) std::free(list[i].data);
    std::free(list);
    throw;
  }
  return list;
}

}  // namespace

extern "C" {

c10d_status c10d_all_gather_bytes(c10d_group* group, const void* data, size_t size,
                                  c10d_bytes** out) {
  return guarded([&] {
    const char* call = "c10d_all_gather_bytes";
    ProcessGroup& g = *deref(group, call, "group").group;
    c10d_bytes*& result = outOf(out, call);
    result = listOut(allGatherBytes(g, bytesIn(data, size, call)));
  });
}

c10d_status c10d_broadcast_bytes(c10d_group* group, const void* data, size_t size, int src,
                                 c10d_bytes* out) {
  return guarded([&] {
    const char* call = "c10d_broadcast_bytes";
    ProcessGroup& g = *deref(group, call, "group").group;
    c10d_bytes& result = outOf(out, call);
    std::string bytes = g.rank() == src ? bytesIn(data, size, call) : std::string();
    broadcastBytes(g, bytes, src);
    result = copyOut(bytes.data(), bytes.size());
  });
}

c10d_status c10d_gather_bytes(c10d_group* group, const void* data, size_t size, int dst,
                              c10d_bytes** out) {
  return guarded([&] {
    const char* call = "c10d_gather_bytes";
    ProcessGroup& g = *deref(group, call, "group").group;
    c10d_bytes*& result = outOf(out, call);
    result = nullptr;
    auto all = gatherBytes(g, bytesIn(data, size, call), dst);
    if (all) result = listOut(*all);
  });
}

c10d_status c10d_scatter_bytes(c10d_group* group, const c10d_bytes* pieces, size_t count, int src,
                               c10d_bytes* out) {
  return guarded([&] {
    const char* call = "c10d_scatter_bytes";
    ProcessGroup& g = *deref(group, call, "group").group;
    c10d_bytes& result = outOf(out, call);
    std::vector<std::string> in;
    if (g.rank() == src) {
      C10D_CHECK(pieces != nullptr || count == 0, InvalidArgument, call, ": pieces is NULL with ",
                 "count ", count);
      for (size_t i = 0; i < count; ++i)
        in.push_back(bytesIn(pieces[i].data, pieces[i].size, call));
    }
    std::string mine = scatterBytes(g, in, src);
    result = copyOut(mine.data(), mine.size());
  });
}

c10d_status c10d_send_bytes(c10d_group* group, const void* data, size_t size, int dst, int tag) {
  return guarded([&] {
    const char* call = "c10d_send_bytes";
    sendBytes(*deref(group, call, "group").group, bytesIn(data, size, call), dst, tag);
  });
}

c10d_status c10d_recv_bytes(c10d_group* group, int src, int tag, c10d_bytes* out) {
  return guarded([&] {
    const char* call = "c10d_recv_bytes";
    ProcessGroup& g = *deref(group, call, "group").group;
    c10d_bytes& result = outOf(out, call);
    std::string bytes = recvBytes(g, src, tag);
    result = copyOut(bytes.data(), bytes.size());
  });
}

}  // extern "C"
