#pragma once

/// \file
/// Object collectives: values (typed, through msgpack-cxx) or serialized bytes moved between
/// the ranks of a group.
///
/// torch.distributed's object collectives in C++: all_gather_object, broadcast_object_list,
/// gather_object, scatter_object_list, send_object_list and recv_object_list. The *Bytes forms
/// move serialized bytes of any length; the typed forms pack values with msgpack-cxx (numbers,
/// strings, std containers, structs with MSGPACK_DEFINE, as RPC does) and unpack what other ranks
/// sent within bounds (every count limited by the bytes there are, nesting by 64 levels), so a
/// rank's bad bytes make an error naming it, not an allocation of what they announce.
///
/// Each is blocking and collective over group (send/recv: the two ranks), over its CPU backend:
/// the sizes first (one int64 per rank), then the bytes padded to the longest. Ranks (src, dst)
/// are the group's. Errors: InvalidArgument on every rank for a bad rank or, in scatter, a wrong
/// number of inputs on src; Error naming the rank whose size cannot be held here or whose bytes do
/// not unpack as the type asked for; the ops' own errors (timeouts, lost peers) as they are.
/// Threading: as ProcessGroup's ops.

#ifndef MSGPACK_NO_BOOST
/// Tells msgpack-cxx not to use Boost; defined here unless the includer did.
#define MSGPACK_NO_BOOST
#endif
#include <msgpack.hpp>

#include <optional>
#include <string>
#include <vector>

#include "c10d/ProcessGroup.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {

/// all_gather_object's bytes.
/// \param group the group; every rank calls.
/// \param mine this rank's bytes.
/// \return Every rank's bytes, in rank order.
std::vector<std::string> allGatherBytes(ProcessGroup& group, const std::string& mine);
/// src's bytes on every rank (bytes is src's input and every other rank's output).
/// \param group the group; every rank calls.
/// \param bytes src's input; replaced on every other rank.
/// \param src the rank whose bytes are sent.
void broadcastBytes(ProcessGroup& group, std::string& bytes, int src);
/// Every rank's bytes on dst, in rank order; nullopt elsewhere.
/// \param group the group; every rank calls.
/// \param mine this rank's bytes.
/// \param dst the rank that receives them all.
/// \return On dst, every rank's bytes in rank order; nullopt on the others.
std::optional<std::vector<std::string>> gatherBytes(ProcessGroup& group, const std::string& mine,
                                                    int dst);
/// pieces[r] of src (which passes group.size() pieces; others pass none) to rank r.
/// \param group the group; every rank calls.
/// \param pieces on src, one per rank; ignored on the others.
/// \param src the rank whose pieces are sent.
/// \return This rank's piece.
std::string scatterBytes(ProcessGroup& group, const std::vector<std::string>& pieces, int src);
/// Sends bytes to dst, whose recvBytes with the same tag receives them: their size, then (unless
/// empty) the bytes.
/// \param group the group.
/// \param bytes the bytes.
/// \param dst the receiving rank, not this one.
/// \param tag the tag of both messages, >= 0.
void sendBytes(ProcessGroup& group, const std::string& bytes, int dst, int tag = 0);
/// Receives the bytes src sends with sendBytes and the same tag.
/// \param group the group.
/// \param src the sending rank, not this one.
/// \param tag the tag, >= 0.
/// \return The bytes.
std::string recvBytes(ProcessGroup& group, int src, int tag = 0);

namespace detail {

template <typename T>
std::string packObject(const T& value) {
  msgpack::sbuffer buffer;
  msgpack::pack(buffer, value);
  return std::string(buffer.data(), buffer.size());
}

/// Throws Error naming op and the rank the bytes came from when they are not a T.
template <typename T>
T unpackObject(const std::string& bytes, const char* op, int fromRank) {
  const size_t n = bytes.size();
  try {
    msgpack::object_handle handle = msgpack::unpack(bytes.data(), n, nullptr, nullptr,
                                                    msgpack::unpack_limit(n, n / 2, n, n, n, 64));
    return handle.get().as<T>();
  } catch (const std::exception& e) {
    C10D_THROW(Error, op, ": the ", n, " bytes from rank ", fromRank,
               " do not unpack as the type asked for (", e.what(),
               "); every rank must pass the same type");
  }
}

}  // namespace detail

/// Every rank's object, in rank order.
/// \tparam T a type msgpack-cxx packs; every rank passes the same.
/// \param group the group; every rank calls.
/// \param object this rank's object.
/// \return Every rank's object, in rank order.
template <typename T>
std::vector<T> allGatherObject(ProcessGroup& group, const T& object) {
  std::vector<std::string> all = allGatherBytes(group, detail::packObject(object));
  std::vector<T> objects;
  objects.reserve(all.size());
  for (size_t r = 0; r < all.size(); ++r) {
    objects.push_back(detail::unpackObject<T>(all[r], "all_gather_object", static_cast<int>(r)));
  }
  return objects;
}

/// src's objects on every rank: the others' vectors are replaced (resized to src's length).
/// \tparam T a type msgpack-cxx packs; every rank passes the same.
/// \param group the group; every rank calls.
/// \param objects src's input; replaced on every other rank.
/// \param src the rank whose objects are sent.
template <typename T>
void broadcastObjectList(ProcessGroup& group, std::vector<T>& objects, int src) {
  std::string bytes = group.rank() == src ? detail::packObject(objects) : std::string();
  broadcastBytes(group, bytes, src);
  if (group.rank() != src) {
    objects = detail::unpackObject<std::vector<T>>(bytes, "broadcast_object_list", src);
  }
}

/// Every rank's object on dst, in rank order; nullopt elsewhere.
/// \tparam T a type msgpack-cxx packs; every rank passes the same.
/// \param group the group; every rank calls.
/// \param object this rank's object.
/// \param dst the rank that receives them all.
/// \return On dst, every rank's object in rank order; nullopt on the others.
template <typename T>
std::optional<std::vector<T>> gatherObject(ProcessGroup& group, const T& object, int dst) {
  std::optional<std::vector<std::string>> all = gatherBytes(group, detail::packObject(object), dst);
  if (!all) return std::nullopt;
  std::vector<T> objects;
  for (size_t r = 0; r < all->size(); ++r) {
    objects.push_back(detail::unpackObject<T>((*all)[r], "gather_object", static_cast<int>(r)));
  }
  return objects;
}

/// inputs[r] of src to rank r (src passes one object per rank, the others nothing).
/// \tparam T a type msgpack-cxx packs; every rank passes the same.
/// \param group the group; every rank calls.
/// \param inputs on src, one object per rank; ignored on the others.
/// \param src the rank whose objects are sent.
/// \return This rank's object.
template <typename T>
T scatterObjectList(ProcessGroup& group, const std::vector<T>& inputs, int src) {
  std::vector<std::string> pieces;
  if (group.rank() == src) {
    for (const T& input : inputs) pieces.push_back(detail::packObject(input));
  }
  return detail::unpackObject<T>(scatterBytes(group, pieces, src), "scatter_object_list", src);
}

/// Sends objects to dst, whose recvObjectList with the same tag receives them.
/// \tparam T a type msgpack-cxx packs; dst asks for the same.
/// \param group the group.
/// \param objects the objects.
/// \param dst the receiving rank, not this one.
/// \param tag the tag, >= 0.
template <typename T>
void sendObjectList(ProcessGroup& group, const std::vector<T>& objects, int dst, int tag = 0) {
  sendBytes(group, detail::packObject(objects), dst, tag);
}

/// Replaces objects with what src sent (resized to its length).
/// \tparam T the type src sent.
/// \param group the group.
/// \param objects replaced with what src sent.
/// \param src the sending rank, not this one.
/// \param tag the tag, >= 0.
template <typename T>
void recvObjectList(ProcessGroup& group, std::vector<T>& objects, int src, int tag = 0) {
  objects =
      detail::unpackObject<std::vector<T>>(recvBytes(group, src, tag), "recv_object_list", src);
}

}  // namespace c10d::inline v1
