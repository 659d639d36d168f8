#include "oneflow_lite/runtime/commnet/bounce_transfers.h"

#include <optional>
#include <utility>
#include <vector>

namespace oflite {
namespace {

// The bounce stream of a (register desc, consumer task) pair.
comm::BounceStreamId StreamOf(const ActorMessage& message) {
  return {static_cast<uint64_t>(message.regst_desc_id),
          static_cast<uint64_t>(message.dst_actor_id)};
}

}  // namespace

BounceTransfers::BounceTransfers(comm::CommNet* net, comm::BounceStreamOptions options,
                                 const ZeroCopyRegistry* destinations,
                                 std::function<void(const Status&)> on_error)
    : net_(net), options_(options), destinations_(destinations), on_error_(std::move(on_error)) {
  options_.channel = kBounceChannel;
}

void BounceTransfers::Start() {
  StatusOr<std::unique_ptr<comm::BounceStreams>> streams =
      comm::BounceStreams::Create(net_->transport(), net_->router(), options_,
                                  &net_->stats()->bounce, [this](const Status& status) {
                                    if (on_error_) on_error_(status);
                                  });
  if (streams.ok()) {
    streams_ = std::move(*streams);
    status_ = Status::OK();
  } else {
    status_ = streams.status().WithContext("bounce buffers of the CommNet route");
  }
}

void BounceTransfers::Stop() { streams_.reset(); }

StatusOr<std::string> BounceTransfers::Enqueue(comm::Connection* connection,
                                               const ActorMessage& message, const Regst& regst) {
  RETURN_IF_ERROR(status_);
  if (streams_ == nullptr) return FailedPreconditionError("CommNet route not attached");
  std::vector<comm::ConstSegment> segments;
  BounceAnnouncement announcement;
  uint64_t capacity = 0;
  for (size_t i = 0; i < regst.blobs.size(); ++i) {
    const Blob& blob = regst.blobs[i];
    const uint64_t bytes = static_cast<uint64_t>(blob.ByteSize());
    segments.push_back({blob.raw(), bytes});
    announcement.total += bytes;
    announcement.shapes.push_back(blob.shape());
    capacity += static_cast<uint64_t>(regst.desc->blob(static_cast<int>(i)).bytes());
  }
  // The frame's size does not depend on the payload number: check that it
  // fits before anything is enqueued.
  ASSIGN_OR_RETURN(const std::string unnumbered, EncodeBounceFrame(message, announcement));
  if (unnumbered.size() + comm::MessageRouter::kChannelHeaderSize >
      connection->max_message_size()) {
    return InvalidArgumentError("register ", message.regst_desc_id, ": the shapes of its ",
                                regst.blobs.size(), " blobs do not fit one transport message");
  }
  ASSIGN_OR_RETURN(
      announcement.payload,
      streams_->Enqueue(connection->peer_rank(), StreamOf(message), std::move(segments), capacity));
  return EncodeBounceFrame(message, announcement);
}

void BounceTransfers::Park(int peer_rank, const ActorMessage& message,
                           BounceAnnouncement announcement) {
  parked_.Park(message, Parked{peer_rank, std::move(announcement)});
}

Status BounceTransfers::StartPull(const ActorMessage& produced, const RegstDescProto& src,
                                  Regst* into, comm::Completion done) {
  RETURN_IF_ERROR(status_);
  if (streams_ == nullptr) return FailedPreconditionError("CommNet route not attached");
  const std::string what = "bounce pull of register " + std::to_string(src.regst_desc_id()) + "[" +
                           std::to_string(produced.regst_index) + "] piece " +
                           std::to_string(produced.piece_id);
  std::optional<Parked> parked = parked_.Take(produced);
  if (!parked.has_value()) {
    return FailedPreconditionError(what, ": no bounce frame arrived for ", produced.ToString());
  }
  const BounceAnnouncement& header = parked->announcement;
  StatusOr<const comm::MemoryRegion*> local = destinations_->FindBounceDestination(*into);
  if (!local.ok()) return FailedPreconditionError(what, ": destination ", local.status().message());
  if (header.shapes.size() != into->blobs.size()) {
    return DataLossError(what, ": ", header.shapes.size(), " blobs into a register of ",
                         into->blobs.size());
  }
  std::vector<comm::RegionSegment> segments;
  uint64_t total = 0;
  for (size_t i = 0; i < into->blobs.size(); ++i) {
    Blob& blob = into->blobs[i];
    const int64_t bytes = header.shapes[i].elem_count() * SizeOf(blob.dtype());
    const int64_t capacity = into->desc->blob(static_cast<int>(i)).bytes();
    if (bytes > capacity) {
      return DataLossError(what, ": blob ", i, " of shape ", header.shapes[i].ToString(), " (",
                           bytes, " bytes) exceeds its capacity of ", capacity);
    }
    blob.set_shape(header.shapes[i]);
    const size_t offset = static_cast<size_t>(static_cast<char*>(blob.raw()) - into->base);
    segments.push_back({offset, static_cast<size_t>(bytes)});
    total += static_cast<uint64_t>(bytes);
  }
  if (total != header.total) {
    return DataLossError(what, ": shapes of ", total, " bytes, the producer sent ", header.total);
  }
  return streams_
      ->Pull(parked->peer_rank, StreamOf(produced), header.payload, header.total, *local,
             std::move(segments), std::move(done))
      .WithContext(what);
}

}  // namespace oflite
