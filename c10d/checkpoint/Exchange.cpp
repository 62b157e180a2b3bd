#include "c10d/checkpoint/Exchange.hpp"

#include <algorithm>
#include <cstring>

#include "c10d/core/Exception.hpp"

namespace c10d::inline v1::checkpoint::detail {

namespace {

// Every rank's length of its text, in rank order.
std::vector<int64_t> lengthsOf(ProcessGroup& group, const std::string& mine) {
  int64_t length = static_cast<int64_t>(mine.size());
  std::vector<int64_t> lengths(group.size());
  group
      .allgatherIntoTensor(Tensor::fromBlob(lengths.data(), ScalarType::Int64, {group.size()}),
                           Tensor::fromBlob(&length, ScalarType::Int64, {1}))
      ->wait();
  return lengths;
}

}  // namespace

std::vector<std::string> allgatherText(ProcessGroup* group, const std::string& mine) {
  if (group == nullptr || group->size() == 1) return {mine};
  const int size = group->size();
  const std::vector<int64_t> lengths = lengthsOf(*group, mine);
  const int64_t longest = std::max<int64_t>(1, *std::max_element(lengths.begin(), lengths.end()));
  std::vector<char> padded(longest, 0), all(longest * size);
  std::memcpy(padded.data(), mine.data(), mine.size());
  group
      ->allgatherIntoTensor(Tensor::fromBlob(all.data(), ScalarType::UInt8, {longest * size}),
                            Tensor::fromBlob(padded.data(), ScalarType::UInt8, {longest}))
      ->wait();
  std::vector<std::string> texts;
  for (int r = 0; r < size; ++r) texts.emplace_back(all.data() + r * longest, lengths[r]);
  return texts;
}

std::vector<std::string> gatherText(ProcessGroup* group, const std::string& mine, int root) {
  if (group == nullptr || group->size() == 1) return {mine};
  const int size = group->size();
  const std::vector<int64_t> lengths = lengthsOf(*group, mine);
  const int64_t longest = std::max<int64_t>(1, *std::max_element(lengths.begin(), lengths.end()));
  std::vector<char> padded(longest, 0);
  std::memcpy(padded.data(), mine.data(), mine.size());
  const bool isRoot = group->rank() == root;
  std::vector<std::vector<char>> all(isRoot ? size : 0, std::vector<char>(longest));
  std::vector<Tensor> outputs;
  for (auto& buffer : all) {
    outputs.push_back(Tensor::fromBlob(buffer.data(), ScalarType::UInt8, {longest}));
  }
  group
      ->gather(outputs, Tensor::fromBlob(padded.data(), ScalarType::UInt8, {longest}),
               {.rootRank = root})
      ->wait();
  std::vector<std::string> texts;
  for (int r = 0; isRoot && r < size; ++r) texts.emplace_back(all[r].data(), lengths[r]);
  return texts;
}

Outcome capture(const std::function<void()>& body) {
  try {
    body();
    return {};
  } catch (const CheckpointError& e) {
    return {"CheckpointError", e.what()};
  } catch (const InvalidArgument& e) {
    return {"InvalidArgument", e.what()};
  } catch (const TimeoutError& e) {
    return {"TimeoutError", e.what()};
  } catch (const StateError& e) {
    return {"StateError", e.what()};
  } catch (const Error& e) {
    return {"Error", e.what()};
  } catch (const std::exception& e) {
    return {"Error", e.what()};
  } catch (...) {
    return {"Error", "an exception that is not a std::exception"};
  }
}

namespace {

// type '\n' message '\0' payload: the type has no newline, the message no NUL.
std::string pack(const Outcome& outcome, const std::string& payload) {
  std::string text = outcome.type + "\n" + outcome.message;
  text.erase(std::remove(text.begin() + outcome.type.size(), text.end(), '\0'), text.end());
  text += '\0';
  text += payload;
  return text;
}

Outcome unpack(const std::string& text, std::string& payload) {
  const size_t newline = text.find('\n');
  const size_t nul = text.find('\0');
  C10D_CHECK(newline != std::string::npos && nul != std::string::npos && newline < nul, Error,
             "checkpoint: a rank's message is malformed");
  payload = text.substr(nul + 1);
  return {text.substr(0, newline), text.substr(newline + 1, nul - newline - 1)};
}

void raiseFirst(const std::vector<Outcome>& outcomes, int rank) {
  int failed = -1;
  if (rank < static_cast<int>(outcomes.size()) && !outcomes[rank].type.empty()) {
    failed = rank;
  } else {
    for (size_t r = 0; r < outcomes.size() && failed < 0; ++r) {
      if (!outcomes[r].type.empty()) failed = static_cast<int>(r);
    }
  }
  if (failed < 0) return;
  const Outcome& o = outcomes[failed];
  const std::string message =
      failed == rank ? o.message : "rank " + std::to_string(failed) + ": " + o.message;
  const ErrorContext context{
      .rank = rank, .peers = failed == rank ? std::vector<int>{} : std::vector<int>{failed}};
  if (o.type == "CheckpointError") throw CheckpointError(message, context);
  if (o.type == "InvalidArgument") throw InvalidArgument(message, context);
  if (o.type == "TimeoutError") throw TimeoutError(message, context);
  if (o.type == "StateError") throw StateError(message, context);
  throw Error(message, context);
}

}  // namespace

std::vector<nlohmann::json> exchange(ProcessGroup* group, int rank, const Outcome& outcome,
                                     const nlohmann::json& payload) {
  const std::vector<uint8_t> encoded = nlohmann::json::to_msgpack(payload);
  const std::vector<std::string> texts =
      allgatherText(group, pack(outcome, std::string(encoded.begin(), encoded.end())));
  std::vector<Outcome> outcomes;
  std::vector<nlohmann::json> payloads;
  for (const std::string& text : texts) {
    std::string bytes;
    outcomes.push_back(unpack(text, bytes));
    payloads.push_back(outcomes.back().type.empty() ? nlohmann::json::from_msgpack(bytes)
                                                    : nlohmann::json());
  }
  raiseFirst(outcomes, rank);
  return payloads;
}

}  // namespace c10d::inline v1::checkpoint::detail
