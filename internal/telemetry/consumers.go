package telemetry

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// Consumer types as ConsumerState.Type names them (the lease store's).
const (
	typeDurableConsumer = "DURABLE_CONSUMER"
	typeDurableQueue    = "DURABLE_QUEUE"
)

// Attribute keys of the consumer gauges.
const (
	attrConsumer     = "messaging.consumer.group.name"
	attrConsumerType = "herald.consumer.type"
)

// ConsumerState is what the consumer gauges read of one consumer (the
// lease store's Consumer; this package does not import the store, which
// records metrics of its own).
type ConsumerState struct {
	// ID names the consumer. It is reported only for durable consumers
	// and durable queues: a non-durable queue's id is its reconnect
	// token, so non-durable queues are summed into one series.
	ID string
	// Type is DURABLE_CONSUMER, DURABLE_QUEUE or NON_DURABLE_QUEUE.
	Type string
	// InFlight counts the events Herald holds for the consumer past its
	// committed cursor: leased and not acknowledged, waiting for
	// redelivery, or being dead-lettered.
	InFlight int64
	// Requeued counts the in-flight events that wait for redelivery.
	Requeued int64
}

// ConsumerLister returns the state of every consumer. It is called at
// most once per GaugeOptions.MinInterval, with a context bounded by
// GaugeOptions.Timeout.
type ConsumerLister func(ctx context.Context) ([]ConsumerState, error)

// GaugeOptions tune RegisterConsumerGauges. The zero value takes the
// defaults.
type GaugeOptions struct {
	// Timeout bounds one listing (default 5 s): a slow store makes the
	// gauges skip a collection rather than hold the exporter.
	Timeout time.Duration
	// MinInterval is how long a listing is reused (default 10 s), so that
	// frequent scrapes or several readers cost one listing.
	MinInterval time.Duration
	// MaxSeries bounds the consumers reported by id (default 1,000); the
	// rest are summed under the group name "_other".
	MaxSeries int
}

// RegisterConsumerGauges registers the per-consumer observable gauges
// herald.consumer.lag and herald.consumer.in_flight, read from list when
// the metric reader collects: never on a request's path. Off, it
// registers nothing. Call unregister when the process stops using list
// (the App closes).
//
// Only processes that run Herald's jobs register them (the jobs function,
// or the all-in-one server): on Lambda the metrics are collected after
// every invocation, and a listing per request would be one scan of the
// store per request.
func RegisterConsumerGauges(list ConsumerLister, o GaugeOptions) (unregister func() error, err error) {
	if !Enabled() {
		return func() error { return nil }, nil
	}
	return registerConsumerGauges(otel.Meter(scope), list, o)
}

func registerConsumerGauges(m metric.Meter, list ConsumerLister, o GaugeOptions) (func() error, error) {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.MinInterval <= 0 {
		o.MinInterval = 10 * time.Second
	}
	if o.MaxSeries <= 0 {
		o.MaxSeries = 1000
	}
	lag, err := m.Int64ObservableGauge("herald.consumer.lag", metric.WithUnit("{message}"),
		metric.WithDescription("Events a consumer has not acknowledged past its committed cursor that Herald holds (leased, waiting for redelivery or being dead-lettered); the broker's backlog is not counted."))
	if err != nil {
		return nil, err
	}
	inFlight, err := m.Int64ObservableGauge("herald.consumer.in_flight", metric.WithUnit("{message}"),
		metric.WithDescription("Events delivered to a consumer and not yet acknowledged (lag less those waiting for redelivery)."))
	if err != nil {
		return nil, err
	}
	c := &consumerCache{list: list, o: o}
	reg, err := m.RegisterCallback(func(ctx context.Context, obs metric.Observer) error {
		series, err := c.series(ctx)
		for _, s := range series {
			opts := metric.WithAttributeSet(s.attrs)
			obs.ObserveInt64(lag, s.lag, opts)
			obs.ObserveInt64(inFlight, s.inFlight, opts)
		}
		return err
	}, lag, inFlight)
	if err != nil {
		return nil, err
	}
	return reg.Unregister, nil
}

// consumerSeries is one reported series of the consumer gauges.
type consumerSeries struct {
	attrs         attribute.Set
	lag, inFlight int64
}

// consumerCache lists the consumers at most once per MinInterval.
type consumerCache struct {
	list ConsumerLister
	o    GaugeOptions

	mu     sync.Mutex
	at     time.Time
	cached []consumerSeries
}

// series returns the series to report: the cached ones when fresh, else
// a new listing's. After a failed listing it reports nothing (a stale
// value would look live) and returns the error for the SDK to log.
func (c *consumerCache) series(ctx context.Context) ([]consumerSeries, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && time.Since(c.at) < c.o.MinInterval {
		return c.cached, nil
	}
	ctx, cancel := context.WithTimeout(ctx, c.o.Timeout)
	defer cancel()
	cs, err := c.list(ctx)
	if err != nil {
		c.at, c.cached = time.Time{}, nil
		return nil, err
	}
	c.at, c.cached = time.Now(), summarize(cs, c.o.MaxSeries)
	return c.cached, nil
}

// summarize turns consumer states into series: one per durable consumer
// or durable queue (the first maxSeries of them), one per type for the
// rest, summed.
func summarize(cs []ConsumerState, maxSeries int) []consumerSeries {
	var out []consumerSeries
	sums := map[attribute.Distinct]int{} // index in out of a summed series
	named := 0
	for _, c := range cs {
		group := "_other"
		if c.Type == typeDurableConsumer || c.Type == typeDurableQueue {
			if named < maxSeries {
				group = c.ID
				named++
			}
		} else {
			group = "_non_durable"
		}
		set := attribute.NewSet(system, attribute.String(attrConsumer, group), attribute.String(attrConsumerType, c.Type))
		i, ok := sums[set.Equivalent()]
		if !ok {
			i = len(out)
			sums[set.Equivalent()] = i
			out = append(out, consumerSeries{attrs: set})
		}
		out[i].lag += c.InFlight
		out[i].inFlight += c.InFlight - c.Requeued
	}
	return out
}
