package telemetry

import (
	"connectrpc.com/connect"
	"connectrpc.com/otelconnect"
)

// ConnectHandlerOption returns the option that instruments a Connect/gRPC
// handler with otelconnect when telemetry is on: an rpc.server span per
// call, the child of the request's HTTP server span (Handler), and the
// rpc.server.* metrics without peer addresses (unbounded). Off, it is an
// option that changes nothing. Call it after Setup.
func ConnectHandlerOption() connect.HandlerOption {
	if !Enabled() {
		return connect.WithHandlerOptions()
	}
	// NewInterceptor fails only on a bad option; these are fixed.
	ic, err := otelconnect.NewInterceptor(otelconnect.WithTrustRemote(), otelconnect.WithoutServerPeerAttributes())
	if err != nil {
		return connect.WithHandlerOptions()
	}
	return connect.WithInterceptors(ic)
}
