// The steps both networks' handshakes take on a non-blocking TCP socket (the socket network's
// hellos, socket_net.cc; the verbs network's queue-pair exchange, ib_net.cc): connect without
// waiting and see the connect through, accept what is waiting, name the peer, draw a token.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "support/status.h"
#include "transport/socket.h"

namespace tuccl::net {

/// A random 64-bit word (listener tokens, connection nonces); its own engine per thread.
uint64_t randomWord();

/// A SystemError status: "<what>: <strerror(errno)>".
Status systemError(const std::string& what);

/// A non-blocking TCP_NODELAY socket whose connect to `peer` has started.
Expected<transport::Socket> startConnecting(const transport::SocketAddress& peer);

/// Whether the connect of `socket` to `peer` went through (false: not yet); its error if it failed.
Expected<bool> connectCompleted(const transport::Socket& socket, const transport::SocketAddress& peer);

/// Accepts every connection waiting on `listener` (non-blocking, TCP_NODELAY), handing each to
/// `take`; an accept error other than "nothing waits" ends the loop with it.
Status acceptWaiting(const transport::Socket& listener, const std::function<void(transport::Socket)>& take);

/// The peer's address as text, or "an unknown peer".
std::string peerName(const transport::Socket& socket);

}  // namespace tuccl::net
