#include "rpc/transport/Wire.hpp"

#include <algorithm>
#include <cstring>

#include "c10d/core/Exception.hpp"
#include "rpc/transport/Msgpack.hpp"

namespace c10d::inline v1::rpc {

namespace {

constexpr char kMagic[4] = {'C', '1', '0', 'R'};
// 2: frames may lend tensors, and the transport has frames of its own (kinds 5-8).
constexpr uint8_t kVersion = 2;

void putU32(char* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>(v >> (8 * i));
}
void putU64(char* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<char>(v >> (8 * i));
}
uint32_t getU32(const char* in) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(in[i]);
  return v;
}
uint64_t getU64(const char* in) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<unsigned char>(in[i]);
  return v;
}

}  // namespace

std::string u64Bytes(uint64_t value) {
  std::string bytes(8, '\0');
  putU64(bytes.data(), value);
  return bytes;
}

uint64_t fromU64Bytes(std::string_view bytes) {
  C10D_CHECK(bytes.size() == 8, InvalidArgument, "rpc: expected 8 bytes, got ", bytes.size());
  return getU64(bytes.data());
}

std::string encodeHead(const Frame& frame, uint64_t loan, uint64_t seal) {
  C10D_CHECK(frame.tensors.size() <= kMaxTensors, InvalidArgument,
             "rpc: a message carries at most ", kMaxTensors, " tensors, got ",
             frame.tensors.size());
  // The header's bytes first, filled in once the metadata's length is known.
  std::string head(kHeaderBytes, '\0');
  StringSink sink{head};
  msgpack::packer<StringSink> packer(sink);
  packer.pack_array(6);
  packer.pack(frame.name);
  packer.pack_bin(static_cast<uint32_t>(frame.payload.size()));
  packer.pack_bin_body(frame.payload.data(), frame.payload.size());
  packer.pack_array(static_cast<uint32_t>(frame.tensors.size()));
  for (const Tensor& t : frame.tensors) {
    C10D_CHECK(t.device().isCPU() && t.isContiguous(), InvalidArgument,
               "rpc sends contiguous CPU tensors; got ", t.describe());
    packer.pack_array(2);
    packer.pack(static_cast<int>(t.dtype()));
    packer.pack(t.sizes());
  }
  size_t lent = 0;
  if (loan != 0) {
    for (const Tensor& t : frame.tensors) lent += lendable(t) ? 1 : 0;
  }
  packer.pack(lent == 0 ? uint64_t{0} : loan);
  packer.pack(lent == 0 ? uint64_t{0} : seal);
  packer.pack_array(static_cast<uint32_t>(lent));
  for (uint32_t i = 0; lent > 0 && i < frame.tensors.size(); ++i) {
    if (!lendable(frame.tensors[i])) continue;
    packer.pack_array(2);
    packer.pack(i);
    packer.pack(static_cast<uint64_t>(reinterpret_cast<uintptr_t>(frame.tensors[i].data())));
  }
  const size_t metaBytes = head.size() - kHeaderBytes;
  C10D_CHECK(metaBytes <= kMaxMetaBytes, InvalidArgument, "rpc: message metadata of ", metaBytes,
             " bytes is over the limit of ", kMaxMetaBytes);
  std::memcpy(head.data(), kMagic, 4);
  head[4] = static_cast<char>(kVersion);
  head[5] = static_cast<char>(frame.kind);
  putU64(head.data() + 8, frame.id);
  putU32(head.data() + 16, static_cast<uint32_t>(metaBytes));
  putU32(head.data() + 20, static_cast<uint32_t>(frame.tensors.size()));
  return head;
}

std::pair<char*, size_t> FrameReader::want() {
  if (stage_ == Stage::Tensors) {
    const Tensor& t = frame_.tensors[tensorIndex_];
    return {static_cast<char*>(t.data()) + have_, t.nbytes() - have_};
  }
  return {buffer_.data() + have_, buffer_.size() - have_};
}

std::optional<Frame> FrameReader::filled(size_t n) {
  have_ += n;
  auto [where, left] = want();
  (void)where;
  if (left > 0) return std::nullopt;
  switch (stage_) {
    case Stage::Header: {
      C10D_CHECK(std::memcmp(buffer_.data(), kMagic, 4) == 0, InvalidArgument,
                 "rpc: not a c10d rpc frame (bad magic)");
      C10D_CHECK(static_cast<uint8_t>(buffer_[4]) == kVersion, InvalidArgument,
                 "rpc: frame version ", int(static_cast<uint8_t>(buffer_[4])), ", expected ",
                 int(kVersion));
      auto kind = static_cast<uint8_t>(buffer_[5]);
      C10D_CHECK(kind >= 1 && kind <= kLastFrameKind, InvalidArgument, "rpc: unknown frame kind ",
                 int(kind));
      frame_ = Frame{};
      frame_.kind = static_cast<FrameKind>(kind);
      frame_.id = getU64(buffer_.data() + 8);
      uint32_t metaBytes = getU32(buffer_.data() + 16);
      tensorCount_ = getU32(buffer_.data() + 20);
      C10D_CHECK(metaBytes > 0 && metaBytes <= maxMetaBytes_, InvalidArgument,
                 "rpc: frame metadata length ", metaBytes, " outside (0, ", maxMetaBytes_, "]");
      C10D_CHECK(tensorCount_ <= kMaxTensors, InvalidArgument, "rpc: frame announces ",
                 tensorCount_, " tensors (limit ", kMaxTensors, ")");
      stage_ = Stage::Meta;
      buffer_.assign(metaBytes, '\0');
      have_ = 0;
      return std::nullopt;
    }
    case Stage::Meta: {
      std::vector<std::pair<int, std::vector<int64_t>>> table;
      std::vector<std::pair<uint32_t, uint64_t>> lent;
      try {
        msgpack::object_handle handle = unpackBounded(buffer_.data(), buffer_.size());
        const msgpack::object& meta = handle.get();
        if (meta.type != msgpack::type::ARRAY || meta.via.array.size != 6) {
          throw msgpack::type_error();
        }
        frame_.name = meta.via.array.ptr[0].as<std::string>();
        const msgpack::object& payload = meta.via.array.ptr[1];
        if (payload.type != msgpack::type::BIN) throw msgpack::type_error();
        frame_.payload.assign(payload.via.bin.ptr, payload.via.bin.size);
        table = meta.via.array.ptr[2].as<decltype(table)>();
        frame_.loan = meta.via.array.ptr[3].as<uint64_t>();
        frame_.seal = meta.via.array.ptr[4].as<uint64_t>();
        lent = meta.via.array.ptr[5].as<decltype(lent)>();
      } catch (const std::exception& e) {
        C10D_THROW(InvalidArgument, "rpc: malformed frame metadata (", e.what(), ")");
      }
      C10D_CHECK(table.size() == tensorCount_, InvalidArgument, "rpc: frame announces ",
                 tensorCount_, " tensors but describes ", table.size());
      uint64_t totalBytes = 0;
      for (auto& [dtype, sizes] : table) {
        C10D_CHECK(dtype >= 0 && dtype < static_cast<int>(kAllScalarTypes.size()), InvalidArgument,
                   "rpc: unknown dtype code ", dtype);
        // The sizes' product with zeros counted as 1 is bounded too, so that an empty tensor
        // cannot carry sizes whose strides overflow.
        uint64_t span = elementSize(static_cast<ScalarType>(dtype));
        bool empty = false;
        for (int64_t s : sizes) {
          C10D_CHECK(s >= 0 && s < (int64_t{1} << 40), InvalidArgument, "rpc: tensor size ", s,
                     " out of range");
          auto factor = static_cast<uint64_t>(std::max<int64_t>(s, 1));
          // Checked before multiplying, so the product cannot overflow.
          C10D_CHECK(span <= maxTensorBytes_ / factor, InvalidArgument,
                     "rpc: frame tensors over the limit of ", maxTensorBytes_, " bytes");
          span *= factor;
          empty = empty || s == 0;
        }
        totalBytes += empty ? 0 : span;
        C10D_CHECK(totalBytes <= maxTensorBytes_, InvalidArgument,
                   "rpc: frame tensors over the limit of ", maxTensorBytes_, " bytes");
      }
      C10D_CHECK((frame_.loan == 0) == lent.empty() && (frame_.loan == 0) == (frame_.seal == 0),
                 InvalidArgument, "rpc: frame has loan ", frame_.loan, ", seal at ", frame_.seal,
                 " and ", lent.size(), " lent tensors (all or none of them)");
      lentMask_.assign(table.size(), false);
      for (auto& [index, address] : lent) {
        C10D_CHECK(index < table.size() && !lentMask_[index] && address != 0, InvalidArgument,
                   "rpc: frame lends tensor ", index, " at address ", address, " (it has ",
                   table.size(), " tensors; each may be lent once, from a non-null address)");
        lentMask_[index] = true;
      }
      for (auto& [dtype, sizes] : table) {
        frame_.tensors.push_back(Tensor::empty(sizes, static_cast<ScalarType>(dtype)));
      }
      frame_.lent = std::move(lent);
      startTensors();
      break;
    }
    case Stage::Tensors:
      ++tensorIndex_;
      have_ = 0;
      break;
  }
  // Skip empty and lent tensors; a frame is complete once every other tensor is filled.
  while (stage_ == Stage::Tensors && tensorIndex_ < frame_.tensors.size() &&
         (frame_.tensors[tensorIndex_].nbytes() == 0 || lentMask_[tensorIndex_])) {
    ++tensorIndex_;
  }
  if (stage_ == Stage::Tensors && tensorIndex_ == frame_.tensors.size()) {
    stage_ = Stage::Header;
    buffer_.assign(kHeaderBytes, '\0');
    have_ = 0;
    return std::move(frame_);
  }
  return std::nullopt;
}

void FrameReader::startTensors() {
  stage_ = Stage::Tensors;
  tensorIndex_ = 0;
  have_ = 0;
}

}  // namespace c10d::inline v1::rpc
