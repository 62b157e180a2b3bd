#include "c10d/ObjectCollectives.hpp"

#include <algorithm>
#include <cstring>
#include <limits>

#include "c10d/core/Tensor.hpp"

namespace c10d::inline v1 {
namespace {

Tensor int64s(size_t n) {
  return Tensor::zeros({static_cast<int64_t>(n)}, ScalarType::Int64);
}

// A size rank `from` announced, checked: a negative one, or one this platform's size_t cannot
// hold, is that rank's error, not an allocation.
size_t sizeFrom(int64_t size, const char* op, int from) {
  C10D_CHECK(size >= 0, Error, op, ": rank ", from, " announced ", size, " bytes");
  C10D_CHECK(static_cast<uint64_t>(size) <= std::numeric_limits<size_t>::max(), Error, op,
             ": rank ", from, "'s object is ", size,
             " bytes, more than this platform's size type holds");
  return static_cast<size_t>(size);
}

// Every rank's size through allgather.
std::vector<size_t> allSizes(ProcessGroup& group, size_t mine, const char* op) {
  Tensor in = int64s(1);
  in.data<int64_t>()[0] = static_cast<int64_t>(mine);
  Tensor out = int64s(group.size());
  group.allgatherIntoTensor(out, in)->wait();
  std::vector<size_t> sizes(group.size());
  for (int r = 0; r < group.size(); ++r) sizes[r] = sizeFrom(out.data<int64_t>()[r], op, r);
  return sizes;
}

Tensor paddedBytes(const std::string& bytes, size_t length) {
  Tensor t = Tensor::zeros({static_cast<int64_t>(length)}, ScalarType::UInt8);
  std::memcpy(t.data(), bytes.data(), bytes.size());
  return t;
}

// The longest of sizes, checked to fit size() of them in one buffer.
size_t longestOf(const std::vector<size_t>& sizes, const char* op) {
  const size_t longest = *std::max_element(sizes.begin(), sizes.end());
  C10D_CHECK(longest <= static_cast<size_t>(std::numeric_limits<int64_t>::max()) / sizes.size(),
             Error, op, ": ", sizes.size(), " objects padded to the longest, ", longest,
             " bytes, do not fit in one buffer");
  return longest;
}

std::string bytesOf(const Tensor& t, size_t offset, size_t length) {
  return std::string(static_cast<const char*>(t.data()) + offset, length);
}

}  // namespace

std::vector<std::string> allGatherBytes(ProcessGroup& group, const std::string& mine) {
  const std::vector<size_t> sizes = allSizes(group, mine.size(), "all_gather_object");
  const size_t longest = longestOf(sizes, "all_gather_object");
  std::vector<std::string> all(group.size());
  if (longest == 0) return all;
  Tensor out = Tensor::empty({static_cast<int64_t>(longest * group.size())}, ScalarType::UInt8);
  group.allgatherIntoTensor(out, paddedBytes(mine, longest))->wait();
  for (int r = 0; r < group.size(); ++r) all[r] = bytesOf(out, r * longest, sizes[r]);
  return all;
}

void broadcastBytes(ProcessGroup& group, std::string& bytes, int src) {
  Tensor size = int64s(1);
  size.data<int64_t>()[0] = static_cast<int64_t>(bytes.size());
  group.broadcast(size, {.rootRank = src})->wait();
  const size_t n = sizeFrom(size.data<int64_t>()[0], "broadcast_object_list", src);
  if (n == 0) {
    bytes.clear();
    return;
  }
  Tensor data =
      group.rank() == src ? paddedBytes(bytes, n) : Tensor::empty({int64_t(n)}, ScalarType::UInt8);
  group.broadcast(data, {.rootRank = src})->wait();
  if (group.rank() != src) bytes = bytesOf(data, 0, n);
}

std::optional<std::vector<std::string>> gatherBytes(ProcessGroup& group, const std::string& mine,
                                                    int dst) {
  // Checked here too: when every object is empty no gather runs to check it.
  C10D_CHECK(dst >= 0 && dst < group.size(), InvalidArgument, "gather_object: dst ", dst,
             " out of range [0, ", group.size(), ") on rank ", group.rank(), " of group '",
             group.groupName(), "'");
  const std::vector<size_t> sizes = allSizes(group, mine.size(), "gather_object");
  const size_t longest = longestOf(sizes, "gather_object");
  const bool isDst = group.rank() == dst;
  std::vector<std::string> all(group.size());
  if (longest > 0) {
    std::vector<Tensor> slots;
    for (int r = 0; r < group.size() && isDst; ++r) {
      slots.push_back(Tensor::empty({static_cast<int64_t>(longest)}, ScalarType::UInt8));
    }
    group.gather(slots, paddedBytes(mine, longest), {.rootRank = dst})->wait();
    for (int r = 0; r < group.size() && isDst; ++r) all[r] = bytesOf(slots[r], 0, sizes[r]);
  } else {
    group.barrier()->wait();  // dst still learns nothing before every rank has called
  }
  if (!isDst) return std::nullopt;
  return all;
}

std::string scatterBytes(ProcessGroup& group, const std::vector<std::string>& pieces, int src) {
  const int n = group.size();
  const bool isSrc = group.rank() == src;
  // [valid, size of rank 0's piece, ...]: a src with the wrong number of pieces says so, so that
  // every rank fails alike instead of waiting for a scatter that does not come.
  Tensor header = int64s(n + 1);
  if (isSrc && static_cast<int>(pieces.size()) == n) {
    header.data<int64_t>()[0] = 1;
    for (int r = 0; r < n; ++r) header.data<int64_t>()[r + 1] = int64_t(pieces[r].size());
  }
  group.broadcast(header, {.rootRank = src})->wait();
  if (header.data<int64_t>()[0] != 1) {
    C10D_THROW(InvalidArgument, "scatter_object_list: rank ", src, " (src) passed ",
               isSrc ? detail::concat(pieces.size()) : std::string("the wrong number of"),
               " objects for a group of ", n, " ranks; src passes one per rank");
  }
  std::vector<size_t> sizes(n);
  for (int r = 0; r < n; ++r) {
    sizes[r] = sizeFrom(header.data<int64_t>()[r + 1], "scatter_object_list", src);
  }
  const size_t longest = *std::max_element(sizes.begin(), sizes.end());
  if (longest == 0) return std::string();
  std::vector<Tensor> inputs;
  for (int r = 0; r < n && isSrc; ++r) inputs.push_back(paddedBytes(pieces[r], longest));
  Tensor mine = Tensor::empty({static_cast<int64_t>(longest)}, ScalarType::UInt8);
  group.scatter(mine, inputs, {.rootRank = src})->wait();
  return bytesOf(mine, 0, sizes[group.rank()]);
}

void sendBytes(ProcessGroup& group, const std::string& bytes, int dst, int tag) {
  Tensor size = int64s(1);
  size.data<int64_t>()[0] = static_cast<int64_t>(bytes.size());
  group.send(size, dst, {.tag = tag})->wait();
  if (!bytes.empty()) group.send(paddedBytes(bytes, bytes.size()), dst, {.tag = tag})->wait();
}

std::string recvBytes(ProcessGroup& group, int src, int tag) {
  Tensor size = int64s(1);
  group.recv(size, src, {.tag = tag})->wait();
  const size_t n = sizeFrom(size.data<int64_t>()[0], "recv_object_list", src);
  if (n == 0) return std::string();
  Tensor data = Tensor::empty({static_cast<int64_t>(n)}, ScalarType::UInt8);
  group.recv(data, src, {.tag = tag})->wait();
  return bytesOf(data, 0, n);
}

}  // namespace c10d::inline v1
