// Bringing a Transport up through the control plane, and exchanging memory
// keys. All calls block, bounded by their timeout, and fail naming the rank
// that did not deliver. Thread-compatible (one caller per transport).
#ifndef ONEFLOW_LITE_COMM_CONTROL_CONNECT_H_
#define ONEFLOW_LITE_COMM_CONTROL_CONNECT_H_

#include <string>

#include "oneflow_lite/comm/control/control_client.h"
#include "oneflow_lite/comm/transport.h"

namespace oflite {
namespace comm {
namespace control {

// Publishes this rank's endpoint for every peer, fetches every peer's
// endpoint for this rank, connects, then waits at a barrier so that no
// traffic starts before every rank is connected. `scope` separates
// several transports in one job (e.g. "comm"). On failure, `culprit` (may
// be null) is set to the peer whose endpoint never came or whose
// connection failed, or -1 when no single peer is to blame (e.g. the
// closing barrier failed).
Status ConnectTransport(Transport* transport, ControlClient* control,
                        const std::string& scope,
                        std::chrono::milliseconds timeout, int* culprit = nullptr);

// Memory keys under "<name>@<owner rank>".
Status PublishRemoteKey(ControlClient* control, const std::string& name,
                        const RemoteKey& key);
StatusOr<RemoteKey> FetchRemoteKey(ControlClient* control,
                                   const std::string& name, int owner_rank,
                                   std::chrono::milliseconds timeout);

}  // namespace control
}  // namespace comm
}  // namespace oflite

#endif  // ONEFLOW_LITE_COMM_CONTROL_CONNECT_H_
