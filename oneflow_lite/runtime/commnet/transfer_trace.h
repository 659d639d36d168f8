// TransferTrace: the CommNet actor's one-at-a-time READs as "transfer"
// slices on a trace track of their own (docs/tracing.md), one track per
// actor ("transfers <task>"), so the transfer shows beside the stream that
// waits for it. Inert unless the run is traced (ActorEnv.tracer). Used on
// the actor's thread only.
#ifndef ONEFLOW_LITE_RUNTIME_COMMNET_TRANSFER_TRACE_H_
#define ONEFLOW_LITE_RUNTIME_COMMNET_TRANSFER_TRACE_H_

#include <algorithm>
#include <string>

#include "oneflow_lite/common/id.h"
#include "oneflow_lite/common/trace/trace.h"
#include "oneflow_lite/runtime/actor_message.h"
#include "proto/plan.pb.h"

namespace oflite {

class TransferTrace {
 public:
  void Init(trace::Tracer* tracer, const std::string& actor_name) {
    if (tracer != nullptr) track_ = tracer->AddTrack("transfers " + actor_name);
  }
  // A READ for `produced` starts now.
  void Begin() {
    if (track_ != nullptr) begin_ns_ = trace::NowNs();
  }
  // The READ for `produced` (of register `src`) finished now.
  void End(const ActorMessage& produced, const RegstDescProto& src) {
    if (track_ == nullptr || !track_->InWindow(produced.piece_id)) return;
    int64_t bytes = 0;
    for (const BlobInRegst& blob : src.blob())
      bytes = std::max(bytes, blob.offset() + blob.bytes());
    trace::EventRecord* event = track_->Append(5);
    event->category = "transfer";
    event->begin_ns = begin_ns_;
    event->end_ns = trace::NowNs();
    event->format = &Format;  // the name too
    int64_t* n = event->numbers();
    n[0] = produced.regst_desc_id;
    n[1] = produced.regst_index;
    n[2] = produced.piece_id;
    n[3] = bytes;
    n[4] = produced.src_actor_id;
  }

 private:
  // "READ r<desc>[<index>]" and its arguments from the numbers End records.
  static void Format(const trace::EventRecord& record, std::string* name, std::string* args) {
    const int64_t* n = record.numbers();
    *name = "READ r" + std::to_string(n[0]) + "[" + std::to_string(n[1]) + "]";
    *args = "\"iteration\":" + std::to_string(n[2]) + ",\"bytes\":" + std::to_string(n[3]) +
            ",\"from\":\"" + TaskIdToString(n[4]) + "\"";
  }

  trace::Track* track_ = nullptr;
  int64_t begin_ns_ = 0;
};

}  // namespace oflite

#endif  // ONEFLOW_LITE_RUNTIME_COMMNET_TRANSFER_TRACE_H_
