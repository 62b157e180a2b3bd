#include "c10d/CollectiveCheck.hpp"

#include <algorithm>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1 {

DebugLevel debugLevel(const config::Settings& settings) {
  std::string text = settings.value("C10D_DEBUG");
  if (text == "INFO") return DebugLevel::Info;
  if (text == "DETAIL") return DebugLevel::Detail;
  return DebugLevel::Off;
}

namespace detail {

Tensor encodeCall(const Op& op) {
  Tensor words = Tensor::zeros({kCallWords}, ScalarType::Int64);
  int64_t* w = words.data<int64_t>();
  w[0] = static_cast<int64_t>(op.seq);
  w[1] = static_cast<int64_t>(op.type);
  const bool tensor = op.ndim >= 0;
  w[2] = tensor ? static_cast<int64_t>(op.dtype) : -1;
  w[3] = tensor ? static_cast<int64_t>(op.device) : -1;
  w[4] = tensor ? op.tensors : 0;
  w[5] = op.traits().rooted ? op.root : -1;
  w[6] = op.traits().reduces ? static_cast<int64_t>(op.reduceOp.kind()) : -1;
  int64_t ndim = op.ndim;
  int64_t dims[Op::kMaxDims];
  std::copy(op.dims, op.dims + Op::kMaxDims, dims);
  switch (op.traits().shapes) {
    case OpTraits::Shapes::Same:
      break;
    case OpTraits::Shapes::AnyRows:
      if (ndim > 0) dims[0] = -1;
      break;
    case OpTraits::Shapes::Any:
      if (ndim >= 0) {
        ndim = 1;
        dims[0] = -1;
      }
      break;
  }
  w[7] = ndim;
  for (int64_t d = 0; d < ndim; ++d) w[8 + d] = dims[d];
  return words;
}

Op decodeCall(const Tensor& words) {
  const int64_t* w = words.data<int64_t>();
  Op op;
  op.seq = static_cast<uint64_t>(w[0]);
  op.type = w[1] >= 0 && w[1] < kOpTypes ? static_cast<OpType>(w[1]) : OpType::Barrier;
  op.ndim = static_cast<int8_t>(std::clamp<int64_t>(w[7], -1, Op::kMaxDims));
  if (op.ndim >= 0) {
    op.dtype = static_cast<ScalarType>(w[2]);
    op.device = static_cast<DeviceType>(w[3]);
  }
  op.tensors = static_cast<int32_t>(w[4]);
  op.root = static_cast<int32_t>(w[5]);
  if (w[6] >= 0) op.reduceOp = ReduceOp(static_cast<ReduceOp::Kind>(w[6]));
  for (int d = 0; d < op.ndim; ++d) op.dims[d] = w[8 + d];
  return op;
}

std::string describeMismatch(const std::vector<Op>& byRank) {
  std::vector<std::pair<std::string, std::vector<int>>> groups;  // description -> ranks
  for (size_t r = 0; r < byRank.size(); ++r) {
    std::string text = describeNumbered(byRank[r]);
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
}  // namespace c10d::inline v1
