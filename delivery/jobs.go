package delivery

import (
	"context"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/herr"
)

// ExpiryReport is what one run of the lease-expiry sweep did.
type ExpiryReport struct {
	// Consumers counts the consumers swept.
	Consumers int
	// Leases and Events count what was requeued (see
	// leasestore.Store.ExpireLeases).
	Leases int
	Events int64
	// Failed counts consumers the sweep could not write; the next run
	// tries them again.
	Failed int
}

// ExpireLeases runs the lease-expiry sweep over every consumer: each one's
// expired leases are requeued with one conditional write (see
// leasestore.Store.ExpireLeases). A consumer deleted during the sweep is
// skipped. When some consumers could not be swept it returns the report
// together with a herr.Unavailable error, so a scheduler retries; the
// sweep is idempotent.
func (s *Service) ExpireLeases(ctx context.Context, p *auth.Principal) (*ExpiryReport, error) {
	if err := p.Require(auth.PermRunJobs); err != nil {
		return nil, err
	}
	cs, err := s.cfg.Store.ListConsumers(ctx)
	if err != nil {
		return nil, err
	}
	rep := &ExpiryReport{}
	for _, c := range cs {
		ex, err := s.cfg.Store.ExpireLeases(ctx, c.ID)
		switch {
		case err == nil:
			rep.Consumers++
			rep.Leases += ex.Leases
			rep.Events += ex.Events
		case herr.CodeOf(err) == herr.NotFound:
			// Deleted since the listing.
		case ctx.Err() != nil:
			return rep, ctx.Err()
		default:
			rep.Failed++
			s.cfg.Logger.WarnContext(ctx, "lease-expiry sweep failed", "consumer", c.ID, "err", err)
		}
	}
	if rep.Failed > 0 {
		return rep, herr.New(herr.Unavailable, "the lease-expiry sweep could not update %d of %d consumers; retry", rep.Failed, len(cs))
	}
	return rep, nil
}
