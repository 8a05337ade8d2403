package leasestore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"gocloud.dev/gcerrors"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore/internal/faults"
)

// Idempotency-key records: what a keyed publish answered, so that a
// publisher's retry of it (a timeout, a dropped connection, a retryable
// error) answers the same instead of publishing a second copy
// (docs/api.md, "Idempotency keys").
//
// One record per (principal, key), kind "idempotency", keyed
// "i:<unpadded base64url of SHA-256(principal, key)>": the digest keeps
// the record key at 45 bytes whatever the principal and key, and makes
// one principal's key another record than anyone else's. A record is
// claimed (in progress) or done:
//
//	claimed  written by ClaimKey before anything is published: the
//	         request's fingerprint, the caller's plan (the event ids and
//	         publish time it will send), and a hold: until the hold
//	         lapses nobody else publishes under the key (a repeat is
//	         told to retry, KeyBusy)
//	done     rewritten by CompleteKey once the broker accepted the
//	         plan: the result, answered to every repeat (KeyDone)
//
// Both writes are revision-conditional (a create that fails when the key
// exists, then a replace of the revision read), so two claims of one key
// never both win on any backend.
//
// # Crash points
//
// A crash between ClaimKey and the broker publish (fault point
// faults.KeyPublish) leaves a claimed record and nothing published. A
// crash between the publish and CompleteKey (faults.KeyComplete) leaves
// a claimed record and the events on the broker. Nothing tells the two
// apart, so both end the same way: once the hold lapses, a repeat takes
// the key over (ClaimKey answers KeyClaimed with TakenOver) and publishes
// the plan recorded by the first claim, the same event ids and publish
// time. At the first point that is the only publish: the event is not
// lost, and is published once. At the second the broker has the event
// twice under one event id, as after any at-least-once redelivery: the
// event is not lost, and a consumer can drop the copy by its id. Neither
// crash loses the event; the first also never publishes it twice.
// Without a crash a repeat never publishes.
//
// # Expiry
//
// A record is forgotten Window after its first claim: read after that it
// counts as absent (and is overwritten by the next claim). Stores delete
// expired records by themselves where they can: the record carries its
// expiry as epoch seconds in "ttl" (the DynamoDB table's TTL attribute)
// and as a timestamp in "expire_at" (the Firestore collection's TTL
// policy); on PostgreSQL and in memory the periodic job calls ReapKeys.
//
// # Cost
//
// A publish without a key touches none of this. A keyed publish writes
// the record twice (the claim, a conditional create, and the completion,
// a conditional replace) and reads nothing when the key is new; a repeat
// reads the record once. See docs/cost-model.md.

// Idempotency limits and defaults.
const (
	// MaxIdempotencyKeyLength is the longest key: 200 characters of
	// printable ASCII (docs/api.md).
	MaxIdempotencyKeyLength = 200
	// DefaultIdempotencyWindow is how long a key is remembered unless the
	// deployment says otherwise (HERALD_IDEMPOTENCY_WINDOW).
	DefaultIdempotencyWindow = 24 * time.Hour
	// MinIdempotencyWindow and MaxIdempotencyWindow bound the window.
	MinIdempotencyWindow = time.Minute
	MaxIdempotencyWindow = 7 * 24 * time.Hour
	// DefaultIdempotencyHold is KeyRequest.Hold's default: how long a
	// claim keeps a key from every other publish. It must exceed the
	// longest publish (the broker's part is bounded by
	// delivery.DefaultPublishTimeout, 5 s), so that a slow publish is
	// never taken over while it still runs.
	DefaultIdempotencyHold = 30 * time.Second
	// MaxIdempotencyRecordBytes bounds a record's plan and result
	// together, below DynamoDB's 400 KB item limit with room for the
	// record's other fields.
	MaxIdempotencyRecordBytes = 350_000
	// MaxFingerprintBytes bounds KeyRequest.Fingerprint (a digest of the
	// request: SHA-256 takes 32).
	MaxFingerprintBytes = 64
)

const (
	kindIdempotency   = "idempotency"
	idempotencyPrefix = "i:"
)

// CheckIdempotencyKey returns herr.InvalidArgument unless key is 1 to
// MaxIdempotencyKeyLength characters of printable ASCII (0x20–0x7e).
func CheckIdempotencyKey(key string) error {
	if key == "" || len(key) > MaxIdempotencyKeyLength {
		return herr.New(herr.InvalidArgument, "an idempotency key must be 1 to %d characters long; this one has %d", MaxIdempotencyKeyLength, len(key))
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x20 || c > 0x7e {
			return herr.New(herr.InvalidArgument, "an idempotency key must be printable ASCII; byte %d is 0x%02x", i, c)
		}
	}
	return nil
}

// CheckIdempotencyWindow returns herr.InvalidArgument unless d is between
// MinIdempotencyWindow and MaxIdempotencyWindow.
func CheckIdempotencyWindow(d time.Duration) error {
	if d < MinIdempotencyWindow || d > MaxIdempotencyWindow {
		return herr.New(herr.InvalidArgument, "the idempotency window must be between %v and %v; got %v", MinIdempotencyWindow, MaxIdempotencyWindow, d)
	}
	return nil
}

// idempotencyKey is the record key of principal's key: see the comment
// at the top of this file.
func idempotencyKey(principal, key string) string {
	h := sha256.New()
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(principal)))
	h.Write(n[:])
	h.Write([]byte(principal))
	h.Write([]byte(key))
	return idempotencyPrefix + base64.RawURLEncoding.EncodeToString(h.Sum(nil))
}

// keyDoc is the stored form of an idempotency key.
type keyDoc struct {
	Key         string `docstore:"key"`
	Kind        string `docstore:"kind"`
	Fingerprint []byte `docstore:"fp"`
	Plan        []byte `docstore:"plan"`
	Result      []byte `docstore:"result,omitempty"`
	Done        bool   `docstore:"done"`
	Claims      int64  `docstore:"claims"`  // claims so far: 1, then one more per takeover
	HoldUntil   int64  `docstore:"hold_ms"` // Unix ms: the claim's hold
	Expires     int64  `docstore:"exp_ms"`  // Unix ms: when the key is forgotten
	// TTL is Expires in epoch seconds, rounded up: DynamoDB's TTL
	// attribute must be a number of seconds.
	TTL int64 `docstore:"ttl"`
	// ExpireAt is Expires as a timestamp: a Firestore TTL policy needs a
	// timestamp field.
	ExpireAt time.Time `docstore:"expire_at"`

	DocstoreRevision any
}

// KeyRequest is one keyed publish as ClaimKey sees it.
type KeyRequest struct {
	// Principal is the publisher's principal id: keys are scoped to it.
	// Required.
	Principal string
	// Key is the idempotency key (CheckIdempotencyKey).
	Key string
	// Fingerprint is a digest of the request (1–MaxFingerprintBytes
	// bytes): a repeat of the key with another fingerprint is refused
	// (*KeyReusedError).
	Fingerprint []byte
	// Plan is what the publish will send, opaque to the store (the caller
	// keeps its event ids and publish time in it): a takeover publishes
	// the plan of the first claim, not its own. Plan and the result
	// together take at most MaxIdempotencyRecordBytes.
	Plan []byte
	// Window is how long the key is remembered from its first claim: 0
	// takes DefaultIdempotencyWindow, else MinIdempotencyWindow to
	// MaxIdempotencyWindow.
	Window time.Duration
	// Hold is how long a claim keeps the key from everyone else (0 takes
	// DefaultIdempotencyHold).
	Hold time.Duration
}

func (r *KeyRequest) check() error {
	if r.Principal == "" {
		return herr.New(herr.InvalidArgument, "an idempotency key needs a principal")
	}
	if err := CheckIdempotencyKey(r.Key); err != nil {
		return err
	}
	if len(r.Fingerprint) == 0 || len(r.Fingerprint) > MaxFingerprintBytes {
		return herr.New(herr.InvalidArgument, "a request fingerprint must be 1 to %d bytes", MaxFingerprintBytes)
	}
	if len(r.Plan) > MaxIdempotencyRecordBytes {
		return herr.New(herr.InvalidArgument, "a publish plan must be at most %d bytes; this one is %d", MaxIdempotencyRecordBytes, len(r.Plan))
	}
	if r.Window == 0 {
		r.Window = DefaultIdempotencyWindow
	}
	if err := CheckIdempotencyWindow(r.Window); err != nil {
		return err
	}
	if r.Hold <= 0 {
		r.Hold = DefaultIdempotencyHold
	}
	return nil
}

// KeyState is what ClaimKey found.
type KeyState int

const (
	// KeyClaimed: the key is the caller's until KeyClaim.HoldUntil. It
	// publishes KeyClaim.Plan, then calls CompleteKey, or ReleaseKey when
	// nothing was published.
	KeyClaimed KeyState = iota + 1
	// KeyDone: a publish under the key finished: answer KeyClaim.Result
	// and publish nothing.
	KeyDone
	// KeyBusy: another publish holds the key until KeyClaim.HoldUntil:
	// publish nothing, and ask again later.
	KeyBusy
)

// KeyClaim is ClaimKey's answer.
type KeyClaim struct {
	State KeyState
	// TakenOver (KeyClaimed) says an earlier claim's hold lapsed with the
	// key neither done nor released: that publish may or may not have
	// reached the broker, and Plan is its plan, to be published again.
	TakenOver bool
	// Plan is the plan to publish (KeyClaimed) or the one published
	// (KeyDone).
	Plan []byte
	// Result is what CompleteKey recorded (KeyDone).
	Result []byte
	// HoldUntil is when the claim's hold lapses (KeyClaimed: the publish
	// must not start later; KeyBusy: when the key may be taken over).
	HoldUntil time.Time
	// Expires is when the key is forgotten.
	Expires time.Time

	key      string
	doc      *keyDoc
	revision any
}

// RetryAfter is how long, at least a second, a repeat of a KeyBusy key
// should wait at now.
func (c *KeyClaim) RetryAfter(now time.Time) time.Duration {
	d := c.HoldUntil.Sub(now)
	return max(time.Second, (d+time.Second-1)/time.Second*time.Second)
}

// KeyReusedError says an idempotency key was repeated with a request
// other than its first (another fingerprint). Its code is
// herr.InvalidArgument (HTTP 422).
type KeyReusedError struct{}

func (*KeyReusedError) Error() string {
	return "this idempotency key was used with a different request: use a new key for a new request"
}

// Unwrap lets herr.CodeOf see InvalidArgument.
func (e *KeyReusedError) Unwrap() error {
	return &herr.Error{Code: herr.InvalidArgument, Message: e.Error()}
}

// KeyBusyError says a publish under the same key is in progress. Its
// code is herr.Aborted (HTTP 409), with RetryAfter (herr.RetryAfterOf).
type KeyBusyError struct {
	RetryAfter time.Duration
}

func (e *KeyBusyError) Error() string {
	return fmt.Sprintf("a publish with this idempotency key is in progress: retry in %v", e.RetryAfter)
}

// Unwrap lets herr.CodeOf see Aborted and herr.RetryAfterOf RetryAfter.
func (e *KeyBusyError) Unwrap() error {
	return &herr.Error{Code: herr.Aborted, Message: e.Error(), RetryAfter: e.RetryAfter}
}

// ClaimKey claims r.Key for r.Principal, or reports what holds it:
//
//   - new, expired, or released: a claimed record is created (one
//     conditional write) and KeyClaimed returned with r.Plan;
//   - claimed and held: KeyBusy;
//   - claimed, its hold lapsed: taken over (one conditional write that
//     renews the hold), KeyClaimed with TakenOver and the record's plan;
//   - done: KeyDone with the recorded plan and result.
//
// A record whose fingerprint is not r.Fingerprint fails with
// *KeyReusedError, whatever its state.
//
// Errors: herr.InvalidArgument for a request outside its bounds (see
// KeyRequest); *KeyReusedError; herr.Aborted after too many lost races;
// the store's errors.
func (s *Store) ClaimKey(ctx context.Context, r KeyRequest) (*KeyClaim, error) {
	if err := r.check(); err != nil {
		return nil, err
	}
	key := idempotencyKey(r.Principal, r.Key)
	var out *KeyClaim
	err := s.retry(ctx, func() (bool, error) {
		now := s.nowMs()
		fresh := &keyDoc{
			Key: key, Kind: kindIdempotency, Fingerprint: r.Fingerprint, Plan: r.Plan, Claims: 1,
			HoldUntil: now + r.Hold.Milliseconds(),
		}
		fresh.setExpiry(now + r.Window.Milliseconds())
		// Create first: a new key, the common case, costs one write
		// and no read.
		err := s.coll.Create(ctx, fresh)
		if err == nil {
			out = fresh.claim(KeyClaimed)
			return true, nil
		}
		if gcerrors.Code(err) != gcerrors.AlreadyExists {
			return false, storeErr(err)
		}
		d := &keyDoc{Key: key}
		switch err := s.coll.Get(ctx, d); gcerrors.Code(err) {
		case gcerrors.OK:
		case gcerrors.NotFound:
			return false, nil // released or reaped since: create again
		default:
			return false, storeErr(err)
		}
		if d.Expires <= now {
			// Forgotten, though not deleted yet: start afresh.
			fresh.DocstoreRevision = d.DocstoreRevision
			return s.replaceKey(ctx, fresh, KeyClaimed, &out)
		}
		if string(d.Fingerprint) != string(r.Fingerprint) {
			return false, &KeyReusedError{}
		}
		switch {
		case d.Done:
			out = d.claim(KeyDone)
			return true, nil
		case d.HoldUntil > now:
			out = d.claim(KeyBusy)
			return true, nil
		}
		// The holder neither finished nor released the key in its hold:
		// take it over, with its plan.
		d.Claims++
		d.HoldUntil = now + r.Hold.Milliseconds()
		if ok, err := s.replaceKey(ctx, d, KeyClaimed, &out); !ok || err != nil {
			return ok, err
		}
		out.TakenOver = true
		return true, nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// replaceKey writes d over the revision it carries and sets *out to its
// claim in state; a lost race reports false, to be retried.
func (s *Store) replaceKey(ctx context.Context, d *keyDoc, state KeyState, out **KeyClaim) (bool, error) {
	switch err := s.coll.Replace(ctx, d); gcerrors.Code(err) {
	case gcerrors.OK:
		*out = d.claim(state)
		return true, nil
	case gcerrors.NotFound, gcerrors.FailedPrecondition:
		return false, nil
	default:
		return false, storeErr(err)
	}
}

func (d *keyDoc) setExpiry(ms int64) {
	d.Expires = ms
	d.TTL = (ms + 999) / 1000
	d.ExpireAt = time.UnixMilli(ms).UTC()
}

func (d *keyDoc) claim(state KeyState) *KeyClaim {
	return &KeyClaim{
		State: state, Plan: d.Plan, Result: d.Result,
		HoldUntil: time.UnixMilli(d.HoldUntil).UTC(), Expires: time.UnixMilli(d.Expires).UTC(),
		key: d.Key, doc: d, revision: d.DocstoreRevision,
	}
}

// claimed returns c's record as claimed, or InvalidArgument.
func (c *KeyClaim) claimed() (*keyDoc, error) {
	if c == nil || c.State != KeyClaimed || c.doc == nil {
		return nil, herr.New(herr.InvalidArgument, "complete or release a key that ClaimKey claimed")
	}
	return c.doc, nil
}

// CompleteKey records result (opaque to the store) as the answer of c's
// publish: from then on ClaimKey answers KeyDone with it. One
// conditional write of the revision c claimed.
//
// Errors: herr.InvalidArgument for a c that ClaimKey did not claim, or a
// plan and result over MaxIdempotencyRecordBytes; herr.Aborted when the
// key was taken over (c's hold lapsed first) or released or expired
// since: the result is not recorded; the store's errors.
func (s *Store) CompleteKey(ctx context.Context, c *KeyClaim, result []byte) error {
	d, err := c.claimed()
	if err != nil {
		return err
	}
	if len(d.Plan)+len(result) > MaxIdempotencyRecordBytes {
		return herr.New(herr.InvalidArgument, "a publish plan and result must take at most %d bytes together", MaxIdempotencyRecordBytes)
	}
	done := *d
	done.Done, done.Result, done.DocstoreRevision = true, result, c.revision
	switch err := s.coll.Replace(ctx, &done); gcerrors.Code(err) {
	case gcerrors.OK:
		c.State, c.Result, c.revision, c.doc = KeyDone, result, done.DocstoreRevision, &done
		return nil
	case gcerrors.NotFound, gcerrors.FailedPrecondition:
		return herr.New(herr.Aborted, "the idempotency key was taken over or released before its publish was recorded")
	default:
		return storeErr(err)
	}
}

// ReleaseKey forgets c's claim, for a publish that published nothing, so
// that a repeat publishes afresh. One conditional delete of the revision
// c claimed; a key taken over or gone since is left as it is (nil).
//
// Errors: herr.InvalidArgument for a c that ClaimKey did not claim; the
// store's errors.
func (s *Store) ReleaseKey(ctx context.Context, c *KeyClaim) error {
	if _, err := c.claimed(); err != nil {
		return err
	}
	switch err := s.coll.Delete(ctx, &keyDoc{Key: c.key, DocstoreRevision: c.revision}); gcerrors.Code(err) {
	case gcerrors.OK, gcerrors.NotFound, gcerrors.FailedPrecondition:
		c.State = 0
		return nil
	default:
		return storeErr(err)
	}
}

// ReapKeys deletes the idempotency records whose window has passed and
// returns how many it deleted: the expiry of the stores without a TTL of
// their own (PostgreSQL, in memory); on DynamoDB and Firestore the
// table's TTL does it too, lazily (reads already ignore expired records).
//
// Cost: one query of every idempotency record's key and expiry (a scan
// on DynamoDB), then per expired record one read and one conditional
// delete of what was read, so a key claimed again meanwhile stays. It
// goes on past failures and returns them joined.
func (s *Store) ReapKeys(ctx context.Context) (int, error) {
	now := s.nowMs()
	var keys []string
	err := eachOfKind(ctx, s, kindIdempotency, func(d *keyDoc) error {
		if d.Expires <= now {
			keys = append(keys, d.Key)
		}
		return nil
	}, "key", "exp_ms")
	if err != nil {
		return 0, err
	}
	var (
		n    int
		errs []error
	)
	for _, key := range keys {
		d := &keyDoc{Key: key}
		if err := s.coll.Get(ctx, d); err != nil {
			if gcerrors.Code(err) != gcerrors.NotFound {
				errs = append(errs, storeErr(err))
			}
			continue
		}
		if d.Expires > now {
			continue // claimed afresh since the query
		}
		switch err := s.coll.Delete(ctx, &keyDoc{Key: key, DocstoreRevision: d.DocstoreRevision}); gcerrors.Code(err) {
		case gcerrors.OK:
			n++
		case gcerrors.NotFound, gcerrors.FailedPrecondition:
			// Deleted or claimed again since it was read.
		default:
			errs = append(errs, storeErr(err))
		}
	}
	return n, errors.Join(errs...)
}

// KeyedPublish is one publish under an idempotency key, for PublishOnce.
type KeyedPublish struct {
	KeyRequest
	// Wait is how long a repeat waits for a publish in progress under
	// the same key to finish before failing with *KeyBusyError (0: not
	// at all).
	Wait time.Duration
	// Publish sends plan (the caller's, or a taken-over claim's) to the
	// broker, with ctx ending at the claim's hold, and returns the result
	// to record and whether anything was published. When nothing was
	// (an error, or published false) the key is released and a repeat
	// publishes afresh.
	Publish func(ctx context.Context, plan []byte, takenOver bool) (result []byte, published bool, err error)
}

// KeyOutcome is what PublishOnce did.
type KeyOutcome struct {
	// Replayed says the key was done: nothing was published, and Plan and
	// Result are the first publish's.
	Replayed bool
	// TakenOver says the key's earlier claim lapsed and its plan was
	// published again (see "Crash points" at the top of idempotency.go).
	TakenOver bool
	Plan      []byte
	Result    []byte
	// RecordErr is the error of CompleteKey when the publish succeeded but
	// its result could not be recorded: the answer stands, and a repeat
	// after the hold publishes the plan again.
	RecordErr error
}

// PublishOnce runs one keyed publish: it claims the key, publishes, and
// records the result, or answers what the key's first publish answered.
// A key another publish holds is waited for up to p.Wait, then refused
// with *KeyBusyError. The two crash points are faults.KeyPublish (the key
// is claimed, nothing is published yet) and faults.KeyComplete (the
// publish succeeded, its result is not recorded yet), checked with the
// key as the fault's consumer.
//
// Errors: ClaimKey's; *KeyBusyError; Publish's (the key released); a
// fault's.
func (s *Store) PublishOnce(ctx context.Context, p KeyedPublish) (*KeyOutcome, error) {
	c, err := s.claimWait(ctx, p.KeyRequest, p.Wait)
	if err != nil {
		return nil, err
	}
	if c.State == KeyDone {
		return &KeyOutcome{Replayed: true, Plan: c.Plan, Result: c.Result}, nil
	}
	return s.publishClaimed(ctx, p, c)
}

func (s *Store) publishClaimed(ctx context.Context, p KeyedPublish, c *KeyClaim) (*KeyOutcome, error) {
	if err := faults.Check(faults.KeyPublish, p.Key); err != nil {
		return nil, err // a crash: the claim stays until its hold lapses
	}
	// The publish must be over before the hold lapses, or a repeat could
	// take the key over while it still runs. The hold is on the store's
	// clock (Options.Now), the context's deadline on the real one.
	pctx, cancel := context.WithTimeout(ctx, c.HoldUntil.Sub(s.opts.Now()))
	result, published, err := p.Publish(pctx, c.Plan, c.TakenOver)
	cancel()
	if err != nil || !published {
		if rerr := s.ReleaseKey(context.WithoutCancel(ctx), c); rerr != nil && err == nil {
			err = rerr
		}
		if err != nil {
			return nil, err
		}
		return &KeyOutcome{TakenOver: c.TakenOver, Plan: c.Plan, Result: result}, nil
	}
	out := &KeyOutcome{TakenOver: c.TakenOver, Plan: c.Plan, Result: result}
	if err := faults.Check(faults.KeyComplete, p.Key); err != nil {
		return nil, err // a crash: published, the claim stays until its hold lapses
	}
	out.RecordErr = s.CompleteKey(context.WithoutCancel(ctx), c, result)
	return out, nil
}
