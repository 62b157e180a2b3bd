#include "c10d/CollectiveCheck.hpp"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string_view>

#include "c10d/core/Device.hpp"
#include "c10d/core/Exception.hpp"

namespace c10d::inline v0 {

DebugLevel debugLevel(const config::Settings& settings) {
  std::string text = settings.value("C10D_DEBUG");
  if (text == "INFO") return DebugLevel::Info;
  if (text == "DETAIL") return DebugLevel::Detail;
  return DebugLevel::Off;
}

namespace detail {
namespace {

// How much of a collective's tensor shape every rank must agree on.
enum class SizesRule {
  Exact,
  AnyRows,  // alltoall_base: ranks may send different row counts
  Any,      // alltoall: each rank's tensors may have any size
};

struct OpInfo {
  std::string_view name;
  SizesRule sizes;
};

// Ops travel as their index here.
constexpr OpInfo kOps[] = {
    {"broadcast", SizesRule::Exact},
    {"allreduce", SizesRule::Exact},
    {"allreduce_coalesced", SizesRule::Exact},
    {"reduce", SizesRule::Exact},
    {"allgather", SizesRule::Exact},
    {"allgather_into_tensor", SizesRule::Exact},
    {"gather", SizesRule::Exact},
    {"scatter", SizesRule::Exact},
    {"reduce_scatter", SizesRule::Exact},
    {"reduce_scatter_tensor", SizesRule::Exact},
    {"alltoall", SizesRule::Any},
    {"alltoall_base", SizesRule::AnyRows},
    {"barrier", SizesRule::Exact},
};

size_t opIndex(const char* op) {
  // The linker merges equal literals: the caller's name is usually this table's, and comparing
  // pointers first spares every op a strlen and compares (issue 32).
  for (size_t i = 0; i < std::size(kOps); ++i) {
    if (kOps[i].name.data() == op) return i;
  }
  for (size_t i = 0; i < std::size(kOps); ++i) {
    if (kOps[i].name == op) return i;
  }
  C10D_THROW(InvalidArgument, "collective check: unknown op '", op, "'");
}

}  // namespace

CollectiveFingerprint CollectiveFingerprint::of(uint64_t sequence, const char* op,
                                                const Tensor* tensor, int64_t tensors, int64_t root,
                                                std::optional<ReduceOp> reduceOp) {
  CollectiveFingerprint f;
  assign(f, sequence, op, tensor, tensors, root, reduceOp);
  return f;
}

void CollectiveFingerprint::assign(CollectiveFingerprint& f, uint64_t sequence, const char* op,
                                   const Tensor* tensor, int64_t tensors, int64_t root,
                                   std::optional<ReduceOp> reduceOp) {
  f.sequence = sequence;
  f.op.assign(op);
  f.dtype = -1;
  f.device = -1;
  f.sizes.clear();
  f.reduceOp = -1;
  if (tensor != nullptr) {
    f.dtype = static_cast<int64_t>(tensor->dtype());
    f.device = static_cast<int64_t>(tensor->device().type);
    f.sizes.assign(tensor->sizes().begin(), tensor->sizes().end());
    switch (kOps[opIndex(op)].sizes) {
      case SizesRule::Exact:
        break;
      case SizesRule::AnyRows:
        if (!f.sizes.empty()) f.sizes[0] = -1;
        break;
      case SizesRule::Any:
        f.sizes = {-1};
        break;
    }
  }
  f.tensors = tensor == nullptr ? 0 : tensors;
  f.root = root;
  if (reduceOp) f.reduceOp = reduceOp->kind();
}

std::string CollectiveFingerprint::describe() const {
  std::string text = op;
  if (dtype >= 0) {
    text += " ";
    if (static_cast<DeviceType>(device) != DeviceType::CPU) {
      text += std::string(name(static_cast<DeviceType>(device))) + ":";
    }
    text += name(static_cast<ScalarType>(dtype));
    text += "[";
    for (size_t d = 0; d < sizes.size(); ++d) {
      text += (d ? ", " : "") + (sizes[d] < 0 ? std::string("*") : std::to_string(sizes[d]));
    }
    text += "]";
    if (tensors != 1) text += " x" + std::to_string(tensors);
  }
  if (reduceOp >= 0) text += " " + std::string(name(static_cast<ReduceOp::Kind>(reduceOp)));
  if (root >= 0) text += " root " + std::to_string(root);
  return text + " (#" + std::to_string(sequence) + ")";
}

Tensor CollectiveFingerprint::encode() const {
  Tensor words = Tensor::zeros({kWords}, ScalarType::Int64);
  int64_t* w = words.data<int64_t>();
  w[0] = static_cast<int64_t>(sequence);
  w[1] = static_cast<int64_t>(opIndex(op.c_str()));
  w[2] = dtype;
  w[3] = device;
  w[4] = tensors;
  w[5] = root;
  w[6] = reduceOp;
  // Up to kMaxDims sizes; a deeper tensor keeps its last dimensions' product in the last word.
  const auto ndim = static_cast<int64_t>(sizes.size());
  w[7] = ndim;
  for (int64_t d = 0; d < ndim; ++d) {
    int64_t slot = std::min<int64_t>(d, kMaxDims - 1);
    w[8 + slot] = d < kMaxDims ? sizes[d] : w[8 + slot] * sizes[d];
  }
  return words;
}

CollectiveFingerprint CollectiveFingerprint::decode(const Tensor& words) {
  const int64_t* w = words.data<int64_t>();
  CollectiveFingerprint f;
  f.sequence = static_cast<uint64_t>(w[0]);
  f.op = w[1] >= 0 && w[1] < static_cast<int64_t>(std::size(kOps)) ? std::string(kOps[w[1]].name)
                                                                   : std::string("unknown op");
  f.dtype = w[2];
  f.device = w[3];
  f.tensors = w[4];
  f.root = w[5];
  f.reduceOp = w[6];
  for (int64_t d = 0; d < std::min<int64_t>(w[7], kMaxDims); ++d) f.sizes.push_back(w[8 + d]);
  return f;
}

std::string describeMismatch(const std::vector<CollectiveFingerprint>& byRank) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;  // description -> ranks
  for (size_t r = 0; r < byRank.size(); ++r) {
    std::string text = byRank[r].describe();
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& group) { return group.first == text; });
    if (it == groups.end()) {
      groups.push_back({text, {static_cast<int>(r)}});
    } else {
      it->second.push_back(static_cast<int>(r));
    }
  }
  if (groups.size() <= 1) return "";
  std::string message;
  for (const auto& [text, ranks] : groups) {
    message += message.empty() ? "" : "; ";
    message += ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i) {
      message += (i ? ", " : "") + std::to_string(ranks[i]);
    }
    message += ": " + text;
  }
  return message;
}

}  // namespace detail
}  // namespace c10d::inline v0
