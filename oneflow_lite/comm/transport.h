// CommNet transport API: the provider-neutral seam between OneFlow-Lite and a
// network. Providers: tcp/ over sockets, shm/ over shared memory between
// the processes of one host, ibverbs/ over RDMA RC queue pairs; the per-peer
// transport (per_peer_transport.h) picks one of them for each peer.
// Overview, wire formats and flow control: docs/comm.md.
//
// Shape. One Transport per process (per rank). It owns one Connection per
// peer rank and registers memory. Operations are:
//   * RegisterMemory: pins/records a caller-owned buffer and returns an owned
//     MemoryRegion (RAII: destroying it deregisters). A region has a local key
//     (verbs lkey) and a RemoteKey (address, length, rkey) that is encoded to
//     bytes and shipped to peers through the control plane.
//   * PostRead / PostWrite: one-sided transfers between a local region
//     (region + offset) and a peer's region (RemoteKey + offset). The peer's
//     CPU is not involved at the API level (tcp serves them on its progress
//     thread; verbs in the NIC). A READ is one request and one response.
//   * SendMessage: a small message (<= max_message_size()) delivered to the
//     peer's MessageHandler. Messages travel through pre-registered rings of
//     `message_slots` slots per direction; a sender consumes one credit per
//     message and the receiver returns credits after its handler has run, so
//     a receive slot is always posted before a message can land in it (no
//     reliance on RNR retries). Messages beyond the credits wait, in order, in
//     a bounded per-peer backlog; SendMessage never blocks.
//
// Ordering. Messages on one Connection are delivered in send order, exactly
// once. A message sent after a PostWrite's completion callback has run sees
// the written data at the peer. No ordering is promised between concurrently
// outstanding one-sided operations.
//
// Completion. Every Post* that returns OK invokes its callback exactly once,
// on the provider's progress thread (or inside a caller's Transport::Poll,
// below), with OK or the error that ended the operation. A Post* that
// returns an error never invokes its callback, and no callback is ever
// invoked from inside Post* itself (callers may hold their own locks while
// posting).
// Callbacks and message handlers must not block (they may post new
// operations and send messages: posting never blocks).
//
// Caller progress. A thread waiting for a message or a completion may call
// Transport::Poll in its wait loop instead of only yielding: a provider
// that supports it (shm: its rings are shared memory, so a poll is a few
// loads) then delivers what has arrived on that thread, running handlers
// and callbacks there and saving the hop through its progress thread. The
// provider keeps the serialization its progress thread gave, whichever
// thread runs them: one connection's handlers and callbacks never run
// concurrently and its messages stay in order (shm: none of one transport
// run concurrently; the per-peer transport: none of one provider). A
// thread calling Poll must not hold a lock that a handler or callback
// takes, and handlers and callbacks must not call Poll (it returns false
// there).
//
// Errors. A failure of a connection (peer closed or died, protocol violation,
// remote access error, timeout) becomes that connection's sticky status: every
// outstanding operation completes with it, every later call returns it, and
// TransportOptions::on_peer_error is called once. Errors name the peer rank.
// Bounds violations detectable locally (offset + length beyond a region or a
// RemoteKey, message too large) return InvalidArgument and leave the
// connection healthy. A remote key the peer does not know, or a range beyond
// the registered region at the peer, fails the operation and the connection
// (that is what an RC queue pair does).
//
// Threading. Transport, Connection and MemoryRegion methods are thread-safe.
// A MemoryRegion must outlive every operation that uses it (until the
// callback has run); the registered buffer must outlive the region. A region
// may outlive its Transport (it keeps alive what deregistration needs).
// Destroying a Transport closes all connections: outstanding operations
// complete with Cancelled before the destructor returns.
//
// Connecting (done by comm/control's ConnectTransport, control/connect.h,
// or by tests):
//   1. each side calls LocalEndpoint(peer) and ships the bytes to the peer;
//   2. each side calls Connect(peer, peer_endpoint, deadline);
//   3. a barrier across all ranks; only then may traffic flow (an RC queue
//      pair must be in RTR on both sides before the first message).
// Connect may be called for different peers in any order and from any
// thread; it blocks until the connection is usable or the deadline passes.
#ifndef ONEFLOW_LITE_COMM_TRANSPORT_H_
#define ONEFLOW_LITE_COMM_TRANSPORT_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "oneflow_lite/common/status.h"

namespace oflite {
namespace comm {

using Clock = std::chrono::steady_clock;
using Deadline = Clock::time_point;

inline Deadline DeadlineAfter(std::chrono::milliseconds timeout) {
  return Clock::now() + timeout;
}

// What a peer needs to address a registered region: encoded explicitly
// (little-endian, fixed 24 bytes, version-free because it is embedded in
// versioned messages) so it can cross machines and processes.
struct RemoteKey {
  uint64_t address = 0;  // the region's start, in the owner's address space
  uint64_t length = 0;   // bytes registered
  uint32_t rkey = 0;     // provider key (verbs rkey; tcp region id)

  static constexpr size_t kEncodedSize = 24;
  std::string Encode() const;
  static StatusOr<RemoteKey> Decode(const std::string& bytes);

  bool operator==(const RemoteKey& other) const {
    return address == other.address && length == other.length &&
           rkey == other.rkey;
  }
};

// Access a region grants. Local write is needed for a READ's destination;
// remote read/write for a region a peer reads from / writes into.
enum AccessFlags : uint32_t {
  kAccessLocalWrite = 1u << 0,
  kAccessRemoteRead = 1u << 1,
  kAccessRemoteWrite = 1u << 2,
  kAccessAll = kAccessLocalWrite | kAccessRemoteRead | kAccessRemoteWrite,
};

// Memory from Transport::AllocateShareable: not registered, owned by this
// object; destroy it after every region registered inside it.
class SharedBlock {
 public:
  virtual ~SharedBlock() = default;
  virtual uint8_t* data() const = 0;
  virtual size_t size() const = 0;
};

// A registered buffer. Owned by whoever called RegisterMemory; destroying it
// deregisters (after which peers using its RemoteKey fail). Thread-safe
// accessors; the object must not be destroyed while an operation using it is
// outstanding.
class MemoryRegion {
 public:
  virtual ~MemoryRegion() = default;
  MemoryRegion(const MemoryRegion&) = delete;
  MemoryRegion& operator=(const MemoryRegion&) = delete;

  uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  uint32_t access() const { return access_; }
  virtual uint32_t local_key() const = 0;
  virtual RemoteKey remote_key() const = 0;

 protected:
  MemoryRegion(void* data, size_t size, uint32_t access)
      : data_(static_cast<uint8_t*>(data)), size_(size), access_(access) {}

 private:
  friend class Transport;  // AllocateRegistered's default hands it owned_
  uint8_t* const data_;
  const size_t size_;
  const uint32_t access_;
  // Memory the region owns (Transport::AllocateRegistered's default), freed
  // here, after the provider's destructor has deregistered it.
  std::unique_ptr<SharedBlock> owned_;
};

// Runs once per operation on the progress thread (or in a caller's Poll).
using Completion = std::function<void(const Status&)>;

// Called on the progress thread (or in a caller's Poll) for each arriving
// message, one at a time; `data` is valid only during the call (the ring
// slot is recycled afterwards).
using MessageHandler =
    std::function<void(int peer_rank, const void* data, size_t size)>;

// Called once per connection when it fails (on the progress thread or the
// thread that detected the failure).
using PeerErrorHandler = std::function<void(int peer_rank, const Status&)>;

struct TransportOptions {
  int rank = 0;
  int world_size = 1;
  // Ring geometry per direction per peer: slots (= credits) of slot_size
  // bytes each; max_message_size() is slot_size minus the provider's header.
  size_t message_slot_size = 4096;
  int message_slots = 64;
  // Messages waiting for credits, per peer; beyond it SendMessage returns
  // ResourceExhausted.
  int max_backlog_messages = 1 << 16;
  // A peer silent for this long while operations are outstanding (or a
  // connection attempt that takes this long) fails the connection.
  std::chrono::milliseconds peer_timeout{10000};
  MessageHandler on_message;     // may be empty: messages are dropped
  PeerErrorHandler on_peer_error;  // may be empty
};

// The link to one peer. Owned by its Transport; valid until it is destroyed.
class Connection {
 public:
  virtual ~Connection() = default;

  virtual int peer_rank() const = 0;

  // Copies `length` bytes from the peer's region (`remote`, at
  // `remote_offset`) into `local` at `local_offset`. `local` needs
  // kAccessLocalWrite; the peer region needs kAccessRemoteRead.
  virtual Status PostRead(const MemoryRegion& local, size_t local_offset,
                          const RemoteKey& remote, size_t remote_offset,
                          size_t length, Completion done) = 0;

  // Copies `length` bytes from `local` at `local_offset` into the peer's
  // region at `remote_offset`; the peer region needs kAccessRemoteWrite.
  virtual Status PostWrite(const MemoryRegion& local, size_t local_offset,
                           const RemoteKey& remote, size_t remote_offset,
                           size_t length, Completion done) = 0;

  // Copies `size` bytes into the send ring (or the backlog) and returns.
  virtual Status SendMessage(const void* data, size_t size) = 0;

  // SendMessage for each of `messages` (taken over: no copy where the
  // provider queues them), in order, handed to the wire
  // together where the provider can: tcp queues them under one lock and
  // writes them with one system call (a batch of small messages otherwise
  // costs one trip through the kernel's TCP stack each); ibverbs posts them
  // as chains of work requests, one doorbell per chain. A message above
  // max_message_size() fails the call before any is sent (InvalidArgument);
  // otherwise the result is what the messages' SendMessage calls would
  // return (the first error; the messages before it are sent). The default
  // calls SendMessage in a loop.
  virtual Status SendMessages(std::vector<std::string> messages);
  // One message: `head_size` bytes at `head`, then `body_size` at `body`,
  // as SendMessage of the two joined. A provider may copy both straight
  // into its buffers (shm: into the ring slot) instead of joining them
  // first; the default joins them and calls SendMessage.
  virtual Status SendMessageParts(const void* head, size_t head_size, const void* body,
                                  size_t body_size);
  // InvalidArgument naming the first of `messages` above max_message_size()
  // (for SendMessages, before it sends any); OK otherwise.
  Status CheckBatchSizes(const std::vector<std::string>& messages) const;

  virtual size_t max_message_size() const = 0;

  // True when this connection also orders a message after a WRITE that is
  // still outstanding: a message sent after PostWrite returned OK (without
  // waiting for its completion) reaches the peer's handler only once that
  // WRITE's data is in the peer's memory, and never if the WRITE fails there
  // (the connection fails first). Lets a sender announce data together with
  // it instead of one completion round trip later (the ring's READY,
  // docs/comm.md). tcp: one byte stream the peer reads in order; ibverbs:
  // one RC queue pair executing its requests in order. The default,
  // false, promises only what "Ordering" above says. Constant; thread-safe.
  virtual bool OrdersMessagesAfterWrites() const { return false; }

  // OK while healthy; the sticky error afterwards.
  virtual Status status() const = 0;

  // Blocks until every operation and message posted before the call has
  // completed (messages: handed to the peer's handler), the connection fails,
  // or the deadline passes (DeadlineExceeded naming the peer).
  virtual Status Flush(Deadline deadline) = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;

  virtual const char* provider_name() const = 0;
  // The provider carrying traffic to `peer_rank` once connected: differs
  // from provider_name() only for the per-peer `auto` transport
  // (per_peer_transport.h). Thread-safe.
  virtual std::string PeerProvider(int peer_rank) const { return provider_name(); }
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Registers caller-owned memory. Non-blocking apart from the provider's
  // registration cost (verbs pins pages). `size` may be 0.
  virtual StatusOr<std::unique_ptr<MemoryRegion>> RegisterMemory(
      void* data, size_t size, uint32_t access) = 0;

  // New memory of `size` bytes (page-aligned, zero-filled), registered; the
  // region owns it and frees it after deregistering. What MPI_Alloc_mem is
  // to MPI: memory placed where peers reach it fastest. It is
  // AllocateShareable and one RegisterMemory of the whole block, so over
  // shm peers on the host map it and their READs and WRITEs of it are plain
  // copies in their own address space instead of cross-memory attach (4x
  // the bytes per second here, docs/comm.md). Registered pools
  // (memory/registered_pool.h), and so ring scratch and the runtime's
  // collective buffers, take their blocks from here.
  virtual StatusOr<std::unique_ptr<MemoryRegion>> AllocateRegistered(size_t size,
                                                                     uint32_t access);
  // New memory of `size` bytes (page-aligned, zero-filled) that is not
  // registered: the caller registers parts of it later (RegisterMemory),
  // and the provider may make those registrations reachable the fast way
  // (shm: the block is a memfd, and a region registered inside it is mapped
  // by the peers). Nothing is pinned until then. Default: ordinary memory.
  virtual StatusOr<std::unique_ptr<SharedBlock>> AllocateShareable(size_t size);

  // This side's endpoint description for `peer_rank` (opaque bytes for the
  // peer's Connect). Calling it twice for a peer returns the same bytes.
  virtual StatusOr<std::string> LocalEndpoint(int peer_rank) = 0;

  // Establishes the connection to `peer_rank` using the bytes its
  // LocalEndpoint(rank()) returned. Blocks until connected or the deadline.
  virtual Status Connect(int peer_rank, const std::string& peer_endpoint,
                         Deadline deadline) = 0;

  // The connection to `peer_rank`, or FailedPrecondition if not connected.
  virtual StatusOr<Connection*> GetConnection(int peer_rank) = 0;

  // Caller progress ("Caller progress" above): delivers, on the calling
  // thread and without blocking, what has arrived; true if it delivered or
  // completed anything. False, doing nothing, when the provider has none
  // (the default; tcp, ibverbs) or another thread is progressing right now:
  // the caller then yields as before. Thread-safe. While callers poll, the
  // provider may let its progress thread nap (shm: it resumes within 2 ms of
  // the last Poll, kCallerQuiet), so a caller about to sleep on
  // something else should call EndPolling first.
  virtual bool Poll() { return false; }
  // The calling thread stops polling (e.g. before it sleeps on a condition
  // variable): the progress thread takes over at once. Thread-safe.
  virtual void EndPolling() {}
  // A thread that waits for this transport's deliveries or completions
  // without polling (a ring collective's waits, an actor waiting for a
  // peer's register) holds a BlockingWait (below) meanwhile: a provider
  // whose progress thread steps aside for polling callers keeps it at work
  // (waking it if it napped), and Poll does nothing until the last such
  // waiter ends, so what the waiter needs never waits for a poller.
  // Counted; thread-safe. Providers without caller progress ignore it.
  virtual void BeginBlockingWait() {}
  virtual void EndBlockingWait() {}
};

// Begin/EndBlockingWait for a scope; null transport: nothing.
class BlockingWait {
 public:
  explicit BlockingWait(Transport* transport) : transport_(transport) {
    if (transport_ != nullptr) transport_->BeginBlockingWait();
  }
  ~BlockingWait() {
    if (transport_ != nullptr) transport_->EndBlockingWait();
  }
  BlockingWait(const BlockingWait&) = delete;
  BlockingWait& operator=(const BlockingWait&) = delete;

 private:
  Transport* const transport_;
};

// Synchronous helpers on top of the callbacks: post and wait (bounded).
// On DeadlineExceeded the operation may still be outstanding: keep `local`
// alive until the connection fails or the Transport is destroyed.
Status ReadSync(Connection* connection, const MemoryRegion& local,
                size_t local_offset, const RemoteKey& remote,
                size_t remote_offset, size_t length, Deadline deadline);
Status WriteSync(Connection* connection, const MemoryRegion& local,
                 size_t local_offset, const RemoteKey& remote,
                 size_t remote_offset, size_t length, Deadline deadline);

// "shm", or for a transport whose peers use different providers
// "auto: shm to ranks 1, 2; tcp to rank 3" (start-up lines, --stats).
std::string DescribePeerProviders(const Transport& transport);

// Shared bounds check used by providers before posting.
Status CheckTransferBounds(int peer_rank, const MemoryRegion& local,
                           size_t local_offset, const RemoteKey& remote,
                           size_t remote_offset, size_t length);

// The owner's check of a one-sided operation on one of its registered
// regions, for the providers that do in software what an RC queue pair's
// NIC does (tcp: tcp_region_table.h; shm: shm_region_table.h). The region
// is registered under `rkey` at [base, base + size) granting `granted`;
// the operation touches [address, address + length) and needs `access`
// (kAccessRemoteRead or kAccessRemoteWrite). OutOfRange unless the range
// lies inside the region, then PermissionDenied unless the access is
// granted; the message names the key, the ranges and the access.
Status CheckRegionAccess(uint32_t rkey, uint64_t base, uint64_t size,
                         uint32_t granted, uint64_t address, uint64_t length,
                         uint32_t access);

}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_TRANSPORT_H_
