package delivery

import (
	"context"
	"time"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/leasestore"
)

// ReapConnections deletes the connection records of the API Gateway
// WebSocket bridge (leasestore.Connection) not written for maxAge and
// returns them: connections whose $disconnect never came (API Gateway
// delivers it at most once). Ending their stream sessions is the caller's
// (package functions/wslambda, which owns the records' Data). Needs
// run:jobs; errors are leasestore.Store.ReapConnections'.
func (s *Service) ReapConnections(ctx context.Context, p *auth.Principal, maxAge time.Duration) ([]*leasestore.Connection, error) {
	if err := p.Require(auth.PermRunJobs); err != nil {
		return nil, err
	}
	return s.cfg.Store.ReapConnections(ctx, maxAge)
}
