// One TCP connection of the CommNet TCP provider (internal to tcp/).
//
// Owned by TcpTransportImpl; a connection bound to a rank lives until the
// transport is destroyed (when failed, as a tombstone holding its sticky
// status); an accepted one that fails before its HELLO is freed at once.
// Until the handshake completes it reads through a 1 KiB buffer and accepts
// only handshake frames of at most kMaxHandshakePayload bytes. The socket is
// only read by the progress thread; writes happen under `mutex_` from the
// progress thread or from a caller's thread. Completion callbacks, the
// message handler and the peer-error handler run without `mutex_` held.
#ifndef ONEFLOW_LITE_COMM_TCP_TCP_CONNECTION_H_
#define ONEFLOW_LITE_COMM_TCP_TCP_CONNECTION_H_

#include <condition_variable>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "oneflow_lite/comm/tcp/frame.h"
#include "oneflow_lite/comm/tcp/tcp_region_table.h"
#include "oneflow_lite/comm/transport.h"

namespace oflite {
namespace comm {
namespace tcp {

class TcpTransportImpl;

// Largest payload of a frame received before the handshake completed.
constexpr size_t kMaxHandshakePayload = 4096;

class TcpConnection : public Connection {
 public:
  enum class State { kHandshake, kReady, kFailed };

  // `peer_rank` is -1 for an accepted socket until its HELLO arrives;
  // `address` ("a.b.c.d:port", may be empty) names it until then.
  TcpConnection(TcpTransportImpl* owner, int fd, int peer_rank,
                const std::string& address = "");
  ~TcpConnection() override;

  // Connection API (transport.h).
  int peer_rank() const override;
  Status PostRead(const MemoryRegion& local, size_t local_offset,
                  const RemoteKey& remote, size_t remote_offset, size_t length,
                  Completion done) override;
  Status PostWrite(const MemoryRegion& local, size_t local_offset,
                   const RemoteKey& remote, size_t remote_offset,
                   size_t length, Completion done) override;
  Status SendMessage(const void* data, size_t size) override;
  // One lock, one write for the frames that have credits (the rest wait in
  // the backlog as SendMessage's would).
  Status SendMessages(std::vector<std::string> messages) override;
  size_t max_message_size() const override;
  // True: frames go out in posting order on one stream and the peer's
  // progress thread finishes a WRITE's payload before it reads the next
  // frame (an invalid WRITE fails the connection there).
  bool OrdersMessagesAfterWrites() const override { return true; }
  Status status() const override;
  Status Flush(Deadline deadline) override;

  // Initiator: queues HELLO. Waits for HELLO_ACK until `deadline`.
  Status StartHandshake(const std::string& hello_payload);
  Status WaitReady(Deadline deadline);

  // Progress thread.
  int fd() const { return fd_; }
  void OnReadable();
  void OnWritable();
  // `stalled`: time since the previous tick during which this thread was
  // not listening (held up in a callback or not scheduled); it does not
  // count as the peer's silence.
  void OnTick(Clock::time_point now, Clock::duration stalled);
  // Sticky failure: completes everything outstanding with `status`.
  void Fail(const Status& status);
  // Best effort GOODBYE (nonblocking) before shutdown.
  void SayGoodbye();
  State state() const;

 private:
  struct OutFrame {
    uint8_t header[kFrameHeaderSize];
    std::string owned;                // small payloads
    const uint8_t* payload = nullptr;  // large payloads (registered memory)
    size_t payload_size = 0;
    size_t written = 0;               // over header + payload
    std::unique_ptr<RegionTable::Pin> pin;
  };
  struct PendingOp {
    bool is_read;
    uint8_t* destination;  // reads: where the response lands
    uint64_t length;
    Completion done;
  };

  // All *Locked methods require mutex_.
  void QueueFrameLocked(OutFrame frame);
  // A frame of `type` carrying `payload` (held by the frame).
  static OutFrame OwnedFrame(FrameType type, uint64_t request_id, uint32_t status,
                             std::string payload);
  // A message frame (credits permitting, else into the backlog) without
  // starting a write: the caller writes once for a batch.
  Status EnqueueMessageLocked(std::string bytes);
  void QueueControlLocked(FrameType type, uint64_t request_id,
                          uint32_t status, std::string payload);
  Status WriteSomeLocked();  // nonblocking; updates EPOLLOUT interest
  Status PostTransferLocked(bool is_read, uint8_t* local, const RemoteKey& remote,
                            size_t remote_offset, size_t length,
                            Completion done);
  std::string PeerName() const;

  // Read side (progress thread only).
  Status ReadAvailable();
  Status ConsumeBuffered();
  Status BeginFrame();
  // `payload`: the frame's payload_length bytes (in the input buffer, the
  // spill buffer or the WRITE's destination), valid during the call.
  Status FinishFrame(const uint8_t* payload);
  Status HandleHello(bool is_ack, const uint8_t* payload, size_t size);
  Status HandleCredit(uint64_t credits);
  Status HandleAck(uint64_t request_id, uint32_t status);
  Status HandleReadRequest();
  void ReturnCredits(bool force);
  // Sets the socket's SO_RCVLOWAT and keeps the transport's count of
  // trickling connections (TcpTransportImpl::NoteTrickling) in step: the
  // one place receive_low_water_ changes.
  void SetReceiveLowWater(int want);

  TcpTransportImpl* const owner_;
  const int fd_;
  const std::string address_;

  mutable std::mutex mutex_;
  std::condition_variable changed_;
  int peer_rank_;
  State state_ = State::kHandshake;
  Status status_;
  std::deque<OutFrame> out_;
  bool want_write_ = false;
  std::deque<std::string> backlog_;
  int credits_ = 0;
  uint64_t next_request_id_ = 1;
  std::unordered_map<uint64_t, PendingOp> pending_;
  Clock::time_point last_send_;
  Clock::time_point last_receive_;

  // Read state (progress thread only).
  std::vector<uint8_t> in_buffer_;
  size_t in_begin_ = 0;
  size_t in_end_ = 0;
  bool after_bulk_ = false;  // the last read put a payload in place
  bool have_header_ = false;
  FrameHeader header_;
  // The payload of header_ is handled where it lies in in_buffer_ (a
  // message, handshake or error frame that fits): no copy.
  bool in_place_ = false;
  uint8_t* payload_destination_ = nullptr;
  uint64_t payload_done_ = 0;
  // The socket's SO_RCVLOWAT as last set (TcpOptions::receive_low_water),
  // and when the first read of the payload in progress was.
  int receive_low_water_ = 1;
  Clock::time_point payload_begin_;
  // Payloads of such frames too large for in_buffer_ (a message_slot_size
  // above it; before the handshake, anything above 1 KiB) gather here.
  std::unique_ptr<uint8_t[]> spill_;
  std::unique_ptr<RegionTable::Pin> write_pin_;
  int credits_to_return_ = 0;
};

}  // namespace tcp
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_TCP_TCP_CONNECTION_H_
