package pubsubx

import (
	"context"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/pubsubx/driver"
)

// Opener opens a driver from a parsed URL. Drivers register one per
// scheme; Open wraps what it returns in the portable Broker. An Opener
// rejects query parameters it does not know with herr.InvalidArgument.
type Opener func(ctx context.Context, u *url.URL) (driver.Broker, error)

var (
	openersMu sync.RWMutex
	openers   = map[string]Opener{}
	leftOut   = map[string]error{} // schemes this build leaves out, and why
)

// Register makes a driver available under scheme. It panics if scheme is
// registered twice; drivers call it from init.
func Register(scheme string, o Opener) {
	openersMu.Lock()
	defer openersMu.Unlock()
	if _, dup := openers[scheme]; dup {
		panic("pubsubx: scheme registered twice: " + scheme)
	}
	if _, out := leftOut[scheme]; out {
		panic("pubsubx: scheme is left out and registered: " + scheme)
	}
	openers[scheme] = o
}

// LeaveOut records that this build leaves scheme's driver out on purpose:
// Open then returns err for its URLs instead of "not supported". A
// build-tagged binary (functions/app) calls it from init for every driver
// it does not link. It panics if scheme is registered.
func LeaveOut(scheme string, err error) {
	openersMu.Lock()
	defer openersMu.Unlock()
	if _, ok := openers[scheme]; ok {
		panic("pubsubx: scheme is registered and left out: " + scheme)
	}
	leftOut[scheme] = err
}

// Open opens the Broker named by rawURL, for example "mem://herald". The
// driver's package must be imported (usually for its side effect) so that
// its scheme is registered.
func Open(ctx context.Context, rawURL string) (*Broker, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, herr.Wrap(herr.InvalidArgument, err, "topic URL is not a valid URL")
	}
	openersMu.RLock()
	o, ok := openers[u.Scheme]
	why := leftOut[u.Scheme]
	openersMu.RUnlock()
	if why != nil {
		return nil, why
	}
	if !ok {
		return nil, herr.New(herr.InvalidArgument, "topic URL scheme %q is not supported (known: %s)", u.Scheme, strings.Join(Schemes(), ", "))
	}
	d, err := o(ctx, u)
	if err != nil {
		return nil, err
	}
	return NewBroker(d), nil
}

// Schemes lists the registered schemes, sorted.
func Schemes() []string {
	openersMu.RLock()
	defer openersMu.RUnlock()
	out := make([]string, 0, len(openers))
	for s := range openers {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// CheckQuery returns a herr.InvalidArgument error naming the first query
// parameter of u that is not in known. Drivers call it before opening.
func CheckQuery(u *url.URL, known ...string) error {
	q := u.Query()
	keys := make([]string, 0, len(q))
	for k := range q {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		found := false
		for _, kn := range known {
			if k == kn {
				found = true
				break
			}
		}
		if !found {
			return herr.New(herr.InvalidArgument, "%s URL: unknown query parameter %q", u.Scheme, k)
		}
	}
	return nil
}

// QueryDuration parses u's query parameter name as a Go duration
// ("90s", "2m"). It returns 0 when the parameter is absent, and a
// herr.InvalidArgument error naming u's scheme, the parameter and its
// value when it is not a positive duration. Drivers use it for
// ackdeadline.
func QueryDuration(u *url.URL, name string) (time.Duration, error) {
	s := u.Query().Get(name)
	if s == "" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d <= 0 {
		return 0, herr.New(herr.InvalidArgument, "%s URL: %s %q is not a positive duration", u.Scheme, name, s)
	}
	return d, nil
}
