// Package inmem builds Herald's delivery core over its in-memory broker
// and document store for one test, and closes both when the test ends:
// the wiring that handler and core tests need, written once. Only tests
// import it.
package inmem

import (
	"testing"
	"time"

	"gocloud.dev/docstore"
	"gocloud.dev/docstore/memdocstore"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/pubsubx"
	"github.com/heraldevents/herald/pubsubx/driver"
	"github.com/heraldevents/herald/pubsubx/mem"
)

// Options shape the service New builds. The zero value is a service with
// every default.
type Options struct {
	// AckDeadline is how long the broker waits for a settlement before it
	// redelivers a message; zero is mem.DefaultAckDeadline.
	AckDeadline time.Duration
	// Wrap, when set, wraps the broker's driver before the service uses
	// it: a recording or fault-injecting broker. Broker in the result is
	// the unwrapped one.
	Wrap func(driver.Broker) driver.Broker
	// WrapCollection, when set, wraps the document collection before the
	// lease store uses it: a metering one (storetest.Meter.Wrap).
	// Collection in the result is the unwrapped one.
	WrapCollection func(*docstore.Collection) *docstore.Collection
	// Store configures the lease store. Its Now defaults to Config.Now.
	Store leasestore.Options
	// Config configures the service. Broker and Store are set by New and
	// must be left nil.
	Config delivery.Config
}

// Service is a delivery.Service with the parts it was built from.
type Service struct {
	*delivery.Service
	// Store is the lease store the service uses.
	Store *leasestore.Store
	// Broker is the in-memory broker, without Options.Wrap.
	Broker *pubsubx.Broker
	// Collection is the document collection under Store.
	Collection *docstore.Collection
}

// New builds a service as o says. The broker and the collection are
// closed when t ends, and a failure to close fails t.
func New(t testing.TB, o Options) *Service {
	t.Helper()
	if o.Config.Broker != nil || o.Config.Store != nil {
		t.Fatal("inmem: Options.Config.Broker and Store are set by New")
	}
	coll, err := memdocstore.OpenCollection("key", nil)
	if err != nil {
		t.Fatalf("inmem: open collection: %v", err)
	}
	broker := mem.New(o.AckDeadline)
	t.Cleanup(func() {
		if err := broker.Close(); err != nil {
			t.Errorf("inmem: close broker: %v", err)
		}
		if err := coll.Close(); err != nil {
			t.Errorf("inmem: close collection: %v", err)
		}
	})
	used := broker
	if o.Wrap != nil {
		used = pubsubx.NewBroker(o.Wrap(broker.Driver()))
	}
	if o.Store.Now == nil {
		o.Store.Now = o.Config.Now
	}
	usedColl := coll
	if o.WrapCollection != nil {
		usedColl = o.WrapCollection(coll)
	}
	store := leasestore.New(usedColl, o.Store)
	o.Config.Broker, o.Config.Store = used, store
	return &Service{Service: delivery.New(o.Config), Store: store, Broker: broker, Collection: coll}
}
