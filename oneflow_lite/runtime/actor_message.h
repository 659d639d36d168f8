// ActorMessage: the one message actors exchange, locally through the
// MessageBus and (later) across machines through CommNet.
//
// A message names its sender and receiver by bit-packed actor id
// (oneflow_lite/common/id.h), so the bus routes it with arithmetic: the
// machine field picks local delivery or the remote route, the stream key
// picks the receiving thread. It carries no pointers: a register is named by
// (regst desc id, regst index), which both ends resolve in their own
// RegstStore, so the struct can be encoded field by field on a wire
// (EncodeActorMessage below; fixed 37-byte little-endian layout).
//
// Kinds that travel between actors (also across machines, on the wire):
//   kProduced   src produced register (regst_desc_id, regst_index) for piece_id;
//               dst may read it until it sends kReturned.
//   kReturned   dst's register (regst_desc_id, regst_index) is released by src.
//   kEndOfData  src will produce nothing more on regst_desc_id (EORD).
//   kStart      the runtime tells an actor to begin (sources start acting);
//               src_actor_id is -1.
// Kinds that stay on one machine (EncodeActorMessage refuses them, and
// DecodeActorMessage never yields them):
//   kWakeup     the actor's own wake-up (ActorMessage::Wakeup, src == dst):
//               asynchronous work it started (a ring collective, a device
//               stream's acts) finished; piece_id carries the actor's tag for
//               that work (the piece for a collective, a deferral tag for a
//               device actor).
//   kReadDone   CommNetRoute finished pulling a remote register into the
//               CommNet actor's own copy (ActorMessage::ReadDone): the fields
//               of the "produced" it pulled (src is the remote producer).
//   kAbort      the actor's own notice that the job is aborting
//               (ActorMessage::Abort, src == dst; a collective actor's abort
//               listener sends it so that its Handle fails the run).
// Value type; thread-compatible.
#ifndef ONEFLOW_LITE_RUNTIME_ACTOR_MESSAGE_H_
#define ONEFLOW_LITE_RUNTIME_ACTOR_MESSAGE_H_

#include <cstdint>
#include <string>

#include "oneflow_lite/common/status.h"

namespace oflite {

enum class MessageKind : uint8_t {
  kProduced = 1,
  kReturned = 2,
  kEndOfData = 3,
  kStart = 4,
  // Local only, never on a wire (see above).
  kWakeup = 5,
  kReadDone = 6,
  kAbort = 7,
};

// "produced", "returned", "end-of-data", "start", "wake-up", "read-done",
// "abort".
const char* MessageKindName(MessageKind kind);
// True for the kinds that may cross machines (kProduced .. kStart).
bool IsWireKind(MessageKind kind);

struct ActorMessage {
  MessageKind kind = MessageKind::kStart;
  int64_t src_actor_id = 0;
  int64_t dst_actor_id = 0;
  int64_t regst_desc_id = -1;
  int32_t regst_index = -1;
  int64_t piece_id = -1;  // iteration the register belongs to

  static ActorMessage Produced(int64_t src, int64_t dst, int64_t desc, int32_t index,
                               int64_t piece) {
    return ActorMessage{MessageKind::kProduced, src, dst, desc, index, piece};
  }
  static ActorMessage Returned(int64_t src, int64_t dst, int64_t desc, int32_t index,
                               int64_t piece) {
    return ActorMessage{MessageKind::kReturned, src, dst, desc, index, piece};
  }
  static ActorMessage EndOfData(int64_t src, int64_t dst, int64_t desc) {
    return ActorMessage{MessageKind::kEndOfData, src, dst, desc, -1, -1};
  }
  static ActorMessage Start(int64_t dst) {
    return ActorMessage{MessageKind::kStart, -1, dst, -1, -1, -1};
  }
  static ActorMessage Wakeup(int64_t actor, int64_t tag) {
    return ActorMessage{MessageKind::kWakeup, actor, actor, -1, -1, tag};
  }
  // The completion of pulling the register `produced` names.
  static ActorMessage ReadDone(const ActorMessage& produced) {
    ActorMessage done = produced;
    done.kind = MessageKind::kReadDone;
    return done;
  }
  static ActorMessage Abort(int64_t actor) {
    return ActorMessage{MessageKind::kAbort, actor, actor, -1, -1, -1};
  }
  bool is_wakeup() const { return kind == MessageKind::kWakeup; }

  // "produced m0/cpu0/s0/t1 -> m0/cpu0/s0/t2 regst 7[1] piece 3".
  std::string ToString() const;
  bool operator==(const ActorMessage& o) const {
    return kind == o.kind && src_actor_id == o.src_actor_id && dst_actor_id == o.dst_actor_id &&
           regst_desc_id == o.regst_desc_id && regst_index == o.regst_index &&
           piece_id == o.piece_id;
  }
};

// Wire form for CommNet: kind (1 byte, a wire kind: 1..4), then src, dst,
// regst_desc_id (8 bytes each), regst_index (4 bytes), piece_id (8 bytes),
// all little-endian. InvalidArgument, naming the message, for a local-only
// kind (a wake-up, a READ completion or an abort addressed to another
// machine is a bug in its sender).
inline constexpr int kActorMessageWireBytes = 1 + 8 + 8 + 8 + 4 + 8;
StatusOr<std::string> EncodeActorMessage(const ActorMessage& message);
// DataLoss if `bytes` has the wrong size or a kind that is not a wire kind.
StatusOr<ActorMessage> DecodeActorMessage(const std::string& bytes);

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_ACTOR_MESSAGE_H_
