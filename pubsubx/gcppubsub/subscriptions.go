package gcppubsub

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	pb "cloud.google.com/go/pubsub/v2/apiv1/pubsubpb"
	"google.golang.org/api/iterator"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
)

// createdLabel is the subscription label holding a generation's creation
// time, in Unix milliseconds of the creating host's clock. Pub/Sub keeps
// no creation time of its own, and labels are set in the create request,
// so the label is stamped before the subscription exists: it holds the
// request time plus rpcTimeout (b.createdSlack), rounded up, a bound the
// creation cannot be later than. Dropping by it (see dedupeMargin) never
// drops a message the new generation missed.
const createdLabel = "herald-created"

// createdStamp is t in Unix milliseconds, rounded up.
func createdStamp(t time.Time) int64 {
	ms := t.UnixMilli()
	if t.After(time.UnixMilli(ms)) {
		ms++
	}
	return ms
}

// updateAttempts bounds UpdateSubscription's retries when concurrent
// updates of one name race for the next generation number.
const updateAttempts = 5

// subState is what this process has learned about one subscription's
// generations. It is a cache, never the authority: a deleted generation
// answers NotFound to the pull that names it, which makes the next round
// list the generations again through the admin API, and every Receive
// round probes for the generation after the newest it knows. Every
// process therefore converges on what the server holds.
type subState struct {
	mu         sync.Mutex
	gens       []uint64             // known generations, ascending; nil means list them first
	created    map[uint64]time.Time // createdLabel values read so far
	emptySince map[uint64]time.Time // old generations: since when this process took nothing from them
	lastSeen   map[uint64]time.Time // old generations: when this process last pulled them
}

// state returns the cache entry of base, creating it.
func (b *broker) state(base string) *subState {
	b.mu.Lock()
	defer b.mu.Unlock()
	st := b.subs[base]
	if st == nil {
		st = &subState{created: map[uint64]time.Time{}, emptySince: map[uint64]time.Time{}, lastSeen: map[uint64]time.Time{}}
		b.subs[base] = st
	}
	return st
}

func (st *subState) set(gens []uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.gens = slices.Clone(gens)
}

func (st *subState) snapshot() []uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return slices.Clone(st.gens)
}

// invalidate makes the next round list the generations again.
func (st *subState) invalidate() {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.gens = nil
}

// add records generation g, found by a probe.
func (st *subState) add(g uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if !slices.Contains(st.gens, g) {
		st.gens = append(st.gens, g)
		slices.Sort(st.gens)
	}
}

// forget drops generation g, deleted by this or another process.
func (st *subState) forget(g uint64) {
	st.mu.Lock()
	defer st.mu.Unlock()
	st.gens = slices.DeleteFunc(st.gens, func(x uint64) bool { return x == g })
	delete(st.created, g)
	delete(st.emptySince, g)
	delete(st.lastSeen, g)
}

// baseOf maps a Herald subscription name to its base id.
func (b *broker) baseOf(name string) (string, error) {
	if name == "" {
		return "", herr.New(herr.InvalidArgument, "gcppubsub: subscription name must not be empty")
	}
	return baseID(b.opts.Topic, name), nil
}

// path returns the full name of generation gen of base.
func (b *broker) path(base string, gen uint64) string {
	return b.subPrefix + genID(base, gen)
}

func notFound(name string) error {
	return herr.New(herr.NotFound, "subscription %q does not exist", name)
}

// listGens lists the generations of base that exist on the server,
// ascending, through ListTopicSubscriptions. A missing topic has none.
func (b *broker) listGens(ctx context.Context, base string) ([]uint64, error) {
	var gens []uint64
	err := b.rpc(ctx, func(ctx context.Context) error {
		it := b.pub.ListTopicSubscriptions(ctx, &pb.ListTopicSubscriptionsRequest{Topic: b.topicPath, PageSize: 1000})
		for {
			full, err := it.Next()
			if err == iterator.Done {
				return nil
			}
			if err != nil {
				return err
			}
			id, ok := strings.CutPrefix(full, b.subPrefix)
			if !ok {
				continue // a subscription of another project
			}
			if g, ok := parseGen(base, id); ok {
				gens = append(gens, g)
			}
		}
	})
	if codeOf(err) == codes.NotFound {
		return nil, nil
	}
	slices.Sort(gens)
	return gens, err
}

// knownGens returns the cached generations of base, listing them if the
// cache holds none.
func (b *broker) knownGens(ctx context.Context, base string, st *subState) ([]uint64, error) {
	if gens := st.snapshot(); len(gens) > 0 {
		return gens, nil
	}
	gens, err := b.listGens(ctx, base)
	if err != nil {
		return nil, err
	}
	st.set(gens)
	return gens, nil
}

// createGen creates generation gen of base with filter expression expr.
func (b *broker) createGen(ctx context.Context, base string, gen uint64, expr string) error {
	retention := MessageRetention
	expiration := &pb.ExpirationPolicy{} // no TTL: never expires
	if b.opts.Expiration > 0 {
		expiration.Ttl = durationpb.New(b.opts.Expiration)
		retention = min(retention, b.opts.Expiration)
	}
	req := &pb.Subscription{
		Name:                     b.path(base, gen),
		Topic:                    b.topicPath,
		Filter:                   expr,
		AckDeadlineSeconds:       int32(b.opts.AckDeadline / time.Second),
		MessageRetentionDuration: durationpb.New(retention),
		ExpirationPolicy:         expiration,
		Labels:                   map[string]string{createdLabel: strconv.FormatInt(createdStamp(time.Now().Add(b.createdSlack)), 10)},
	}
	return b.withTopic(ctx, func(ctx context.Context) error {
		_, err := b.sub.CreateSubscription(ctx, req)
		return err
	})
}

// CreateSubscription creates generation 1 of name with the pushed-down
// form of groups (see filterExpression). It fails with herr.AlreadyExists
// if any generation of name exists.
func (b *broker) CreateSubscription(ctx context.Context, name string, groups filter.Groups) error {
	if b.isClosed() {
		return errClosed
	}
	base, err := b.baseOf(name)
	if err != nil {
		return err
	}
	gens, err := b.listGens(ctx, base)
	if err != nil {
		return b.wrap(ctx, err, "gcppubsub: listing subscriptions failed")
	}
	if len(gens) > 0 {
		return herr.New(herr.AlreadyExists, "subscription %q already exists", name)
	}
	err = b.createGen(ctx, base, 1, filterExpression(groups))
	if codeOf(err) == codes.AlreadyExists {
		return herr.New(herr.AlreadyExists, "subscription %q already exists", name)
	}
	if err != nil {
		return b.wrap(ctx, err, "gcppubsub: creating subscription "+strconv.Quote(name)+" failed")
	}
	b.state(base).set([]uint64{1})
	return nil
}

// UpdateSubscription gives name a new filter. Pub/Sub filters are
// immutable, so it creates the next generation with the new filter and
// leaves the older ones to Receive, which drains and then deletes them
// (see the package doc). When the newest generation already has the new
// expression it changes nothing.
func (b *broker) UpdateSubscription(ctx context.Context, name string, groups filter.Groups) error {
	if b.isClosed() {
		return errClosed
	}
	base, err := b.baseOf(name)
	if err != nil {
		return err
	}
	expr := filterExpression(groups)
	st := b.state(base)
	for range updateAttempts {
		gens, err := b.listGens(ctx, base)
		if err != nil {
			return b.wrap(ctx, err, "gcppubsub: listing subscriptions failed")
		}
		if len(gens) == 0 {
			return notFound(name)
		}
		newest := gens[len(gens)-1]
		var cur *pb.Subscription
		err = b.rpc(ctx, func(ctx context.Context) error {
			var err error
			cur, err = b.sub.GetSubscription(ctx, &pb.GetSubscriptionRequest{Subscription: b.path(base, newest)})
			return err
		})
		if codeOf(err) == codes.NotFound {
			continue // deleted meanwhile: list again
		}
		if err != nil {
			return b.wrap(ctx, err, "gcppubsub: reading subscription "+strconv.Quote(name)+" failed")
		}
		if cur.GetFilter() == expr {
			st.set(gens)
			return nil
		}
		err = b.createGen(ctx, base, newest+1, expr)
		if codeOf(err) == codes.AlreadyExists {
			continue // a concurrent update took the number: list again
		}
		if err != nil {
			return b.wrap(ctx, err, "gcppubsub: creating the next generation of subscription "+strconv.Quote(name)+" failed")
		}
		st.set(append(gens, newest+1))
		return nil
	}
	return herr.New(herr.Aborted, "gcppubsub: subscription %q is being updated concurrently; retry", name)
}

// DeleteSubscription deletes every generation of name, and with them
// whatever they hold. It fails with herr.NotFound if none exists.
func (b *broker) DeleteSubscription(ctx context.Context, name string) error {
	if b.isClosed() {
		return errClosed
	}
	base, err := b.baseOf(name)
	if err != nil {
		return err
	}
	gens, err := b.listGens(ctx, base)
	if err != nil {
		return b.wrap(ctx, err, "gcppubsub: listing subscriptions failed")
	}
	if len(gens) == 0 {
		return notFound(name)
	}
	st := b.state(base)
	defer st.invalidate()
	for _, g := range gens {
		if err := b.deleteGen(ctx, base, g); err != nil {
			return b.wrap(ctx, err, "gcppubsub: deleting subscription "+strconv.Quote(name)+" failed")
		}
		st.forget(g)
	}
	// Drop the cache entry, so that a process creating and deleting many
	// short-lived queues does not accumulate them. A Receive still holding
	// it only re-lists.
	b.mu.Lock()
	delete(b.subs, base)
	b.mu.Unlock()
	return nil
}

// deleteGen deletes one generation; one that is already gone is fine.
func (b *broker) deleteGen(ctx context.Context, base string, g uint64) error {
	err := b.rpc(ctx, func(ctx context.Context) error {
		return b.sub.DeleteSubscription(ctx, &pb.DeleteSubscriptionRequest{Subscription: b.path(base, g)})
	})
	if codeOf(err) == codes.NotFound {
		return nil
	}
	return err
}

// createdAt returns generation g's creation time from its label, reading
// it once per process. ok is false when the label is missing or g is gone.
func (b *broker) createdAt(ctx context.Context, base string, st *subState, g uint64) (t time.Time, ok bool, err error) {
	st.mu.Lock()
	t, ok = st.created[g]
	st.mu.Unlock()
	if ok {
		return t, !t.IsZero(), nil
	}
	var s *pb.Subscription
	err = b.rpc(ctx, func(ctx context.Context) error {
		var err error
		s, err = b.sub.GetSubscription(ctx, &pb.GetSubscriptionRequest{Subscription: b.path(base, g)})
		return err
	})
	if codeOf(err) == codes.NotFound {
		return time.Time{}, false, nil
	}
	if err != nil {
		return time.Time{}, false, err
	}
	if ms, perr := strconv.ParseInt(s.GetLabels()[createdLabel], 10, 64); perr == nil {
		t = time.UnixMilli(ms)
	}
	st.mu.Lock()
	st.created[g] = t // zero: no label; remembered so it is read once
	st.mu.Unlock()
	return t, !t.IsZero(), nil
}
