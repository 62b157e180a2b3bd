#include "store/tcp/StoreProtocol.hpp"

namespace c10d::inline v1::protocol {

static_assert(__BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__,
              "the store protocol is little-endian and is encoded with memcpy");

const char* opName(Op op) {
  switch (op) {
    case Op::Set:
      return "set";
    case Op::Get:
      return "get";
    case Op::Add:
      return "add";
    case Op::CompareSet:
      return "compareSet";
    case Op::Delete:
      return "deleteKey";
    case Op::Check:
      return "check";
    case Op::Wait:
      return "wait";
    case Op::NumKeys:
      return "numKeys";
    case Op::MultiGet:
      return "multiGet";
    case Op::MultiSet:
      return "multiSet";
    case Op::Append:
      return "append";
    case Op::Ping:
      return "ping";
    case Op::QueuePush:
      return "queuePush";
    case Op::QueuePop:
      return "queuePop";
    case Op::QueueLen:
      return "queueLen";
  }
  return "unknown";
}

}  // namespace c10d::inline v1::protocol
