package pubsubx

import "strings"

// SubscriptionsFullError is the Send result of a message that a broker
// stored for every subscription it matches but Subscriptions, which had
// no room for it (the in-memory broker's reject-publish bound; package
// pubsubx/mem). Its code (through Unwrap) is herr.ResourceExhausted and
// its caller-safe message says why without naming a subscription.
//
// The message is not lost for those subscriptions' consumers unless the
// publisher lets it be: package delivery moves it into their dead-letter
// queues (reason MAXLEN) and then reports the publish a success, so that
// a publish never depends on how fast any consumer reads. A broker that
// keeps no such bound never returns it.
type SubscriptionsFullError struct {
	// Subscriptions names the full subscriptions, in no particular order.
	Subscriptions []string
	// Err is the herr-coded reason.
	Err error
}

func (e *SubscriptionsFullError) Error() string {
	return e.Err.Error() + " (subscriptions " + strings.Join(e.Subscriptions, ", ") + ")"
}

// Unwrap gives the error its code and caller-safe message.
func (e *SubscriptionsFullError) Unwrap() error { return e.Err }
