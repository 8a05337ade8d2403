package leasestore

import (
	"context"
	"encoding/base64"
	"errors"
	"time"

	"gocloud.dev/gcerrors"

	"github.com/heraldevents/herald/herr"
)

// Claim records hold the encoded events of the claim-check (package
// delivery): an event too big for its broker (pubsubx.Broker.MaxMessageBytes) is
// stored here under its id and the broker carries only a reference.

// Claim limits.
const (
	// MaxClaimIDLength is the longest claim id, in bytes. Herald's claim
	// ids are event ids (36-byte UUIDs); the bound keeps record keys well
	// inside DynamoDB's 2,048-byte and Firestore's 1,500-byte key limits.
	MaxClaimIDLength = 128
	// MaxClaimBytes is the most bytes of a claim's body: 350,000, below
	// DynamoDB's 400 KB item limit (and Firestore's 1 MiB document limit)
	// with room for the record's other fields, the same bound as
	// DefaultMaxPayloadBytes. Herald's largest encoded event (a 256 KiB
	// message in its CloudEvents envelope) fits.
	MaxClaimBytes = 350_000
)

// claimDoc is the stored form of a claim: a record of kind "claim" keyed
// "k:<id in unpadded base64url>" (so that any id is a valid key on every
// backend).
type claimDoc struct {
	Key       string `docstore:"key"`
	Kind      string `docstore:"kind"`
	ID        string `docstore:"id"`
	Body      []byte `docstore:"body"`
	CreatedAt int64  `docstore:"created_ms"` // Unix ms

	DocstoreRevision any
}

const (
	kindClaim   = "claim"
	claimPrefix = "k:"
)

func claimKey(id string) string {
	return claimPrefix + base64.RawURLEncoding.EncodeToString([]byte(id))
}

func checkClaimID(id string) error {
	if id == "" || len(id) > MaxClaimIDLength {
		return herr.New(herr.InvalidArgument, "a claim id must be 1 to %d bytes long", MaxClaimIDLength)
	}
	return nil
}

// PutClaim stores body under claim id, replacing any claim with that id
// (create-or-replace, so a retried put is harmless); its creation time is
// now (Options.Now). One unconditional write.
//
// Errors: herr.InvalidArgument for an id that is empty or longer than
// MaxClaimIDLength bytes, or a body that is empty or over MaxClaimBytes
// bytes; the store's errors (herr.Unavailable, …).
func (s *Store) PutClaim(ctx context.Context, id string, body []byte) error {
	if err := checkClaimID(id); err != nil {
		return err
	}
	if len(body) == 0 || len(body) > MaxClaimBytes {
		return herr.New(herr.InvalidArgument, "a claim body must be 1 to %d bytes; this one is %d", MaxClaimBytes, len(body))
	}
	d := &claimDoc{Key: claimKey(id), Kind: kindClaim, ID: id, Body: body, CreatedAt: s.nowMs()}
	if err := s.coll.Put(ctx, d); err != nil {
		return storeErr(err)
	}
	return nil
}

// GetClaim returns the body stored under claim id. One read.
//
// Errors: herr.InvalidArgument for an id that is empty or too long;
// herr.NotFound when there is no such claim (never stored, or reaped by
// ReapClaims); the store's errors.
func (s *Store) GetClaim(ctx context.Context, id string) ([]byte, error) {
	if err := checkClaimID(id); err != nil {
		return nil, err
	}
	d := &claimDoc{Key: claimKey(id)}
	if err := s.coll.Get(ctx, d); err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, herr.New(herr.NotFound, "claim %q does not exist", id)
		}
		return nil, storeErr(err)
	}
	return d.Body, nil
}

// ReapClaims deletes every claim created more than olderThan ago (by the
// store's clock, Options.Now) and returns how many it deleted. A claim
// exactly olderThan old stays.
//
// Cost: one query of every claim record's key and creation time (records
// of kind "claim"; a scan on DynamoDB), then one delete per old claim.
// Other record kinds are never read or touched. The deletes are not
// conditional: claim ids are fresh event ids, written once. When some
// cannot be deleted it goes on with the others and returns the count so
// far with the errors joined.
//
// Errors: herr.InvalidArgument for olderThan under a millisecond; the
// store's errors.
func (s *Store) ReapClaims(ctx context.Context, olderThan time.Duration) (int, error) {
	if olderThan < time.Millisecond {
		return 0, herr.New(herr.InvalidArgument, "olderThan must be at least a millisecond")
	}
	cutoff := s.nowMs() - olderThan.Milliseconds()
	var keys []string
	err := eachOfKind(ctx, s, kindClaim, func(d *claimDoc) error {
		if d.CreatedAt < cutoff {
			keys = append(keys, d.Key)
		}
		return nil
	}, "key", "created_ms")
	if err != nil {
		return 0, err
	}
	var (
		n    int
		errs []error
	)
	for _, key := range keys {
		switch err := s.coll.Delete(ctx, &claimDoc{Key: key}); gcerrors.Code(err) {
		case gcerrors.OK:
			n++
		case gcerrors.NotFound:
			// Deleted by a concurrent run.
		default:
			errs = append(errs, storeErr(err))
		}
	}
	return n, errors.Join(errs...)
}
