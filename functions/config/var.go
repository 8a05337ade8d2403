package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Profile says which entrypoint reads the environment.
type Profile int

// The profiles.
const (
	Local    Profile = iota // the local adapter (local/cmd/herald, local.Start)
	Lambda                  // the Lambda bootstrap (functions/cmd/lambda)
	CloudRun                // the Cloud Run server (functions/cmd/cloudrun)
)

// String returns the profile's name.
func (p Profile) String() string {
	switch p {
	case Local:
		return "local"
	case Lambda:
		return "lambda"
	case CloudRun:
		return "cloudrun"
	}
	return "profile(" + strconv.Itoa(int(p)) + ")"
}

// Cloud reports whether p runs in a cloud (no development defaults).
func (p Profile) Cloud() bool { return p == Lambda || p == CloudRun }

// Var describes one environment variable: one row of the table.
type Var struct {
	Name string
	// LocalDefault and CloudDefault are used when the variable is unset;
	// "" means none.
	LocalDefault string
	CloudDefault string
	// Unit of the value, for the README table ("" for plain strings).
	Unit string
	// Meaning is a one-line description.
	Meaning string
	// Deploy says that the SAM template and the Terraform module set it on
	// every function that reads it in the cloud.
	Deploy bool
	// Range is what Load accepts, e.g. "1s–24h" or "0, or 1s–10m"; ""
	// for values without a numeric range (names, URLs, lists, JSON).
	Range string
	// Field names the Config field the value lands in; "" for the
	// variables Load reads by hand (tokens, identity provider, CORS) and
	// those package internal/telemetry reads (OTEL_*).
	Field string

	profiles []Profile
	uses     func(Function) bool
	field    binding
}

// ReadBy reports whether entrypoint p serving function f reads v.
func (v Var) ReadBy(p Profile, f Function) bool {
	return v.readIn(p) && (v.uses == nil || v.uses(f))
}

// readIn reports whether profile p reads v, whatever the function.
func (v Var) readIn(p Profile) bool {
	for _, q := range v.profiles {
		if q == p {
			return true
		}
	}
	return false
}

// defaultFor returns v's default under profile p.
func (v Var) defaultFor(p Profile) string {
	if p.Cloud() {
		return v.CloudDefault
	}
	return v.LocalDefault
}

// binding is where a row's value lands in a Config and what it accepts.
type binding interface {
	// set parses s into c; its error says what is expected.
	set(c *Config, s string) error
	// check reports whether the value c holds means anything: looser than
	// set, which holds the environment to the table's operational range
	// (a test may set a 20ms keep-alive; no one may set a negative one).
	check(c *Config) error
	// name is the Config field's name.
	name() string
	// rangeText is the accepted range, "" for none.
	rangeText() string
}

// number is what a bounded row holds.
type number interface{ ~int | ~int64 }

// bounded binds a duration or count field with an inclusive range; with
// off, 0 is accepted too and means "none" (no PINGs, no bound, no delay).
type bounded[T number] struct {
	field  string
	at     func(*Config) *T
	lo, hi T
	off    bool
	parse  func(string) (T, error)
	show   func(T) string
	what   string // "a Go duration", "a whole number"
}

func (b bounded[T]) ok(v T) bool { return (b.off && v == 0) || (v >= b.lo && v <= b.hi) }

func (b bounded[T]) expect() string {
	r := fmt.Sprintf("%s between %s and %s", b.what, b.show(b.lo), b.show(b.hi))
	if b.off && b.lo > 0 {
		return b.show(0) + " or " + r
	}
	return r
}

func (b bounded[T]) set(c *Config, s string) error {
	v, err := b.parse(s)
	if err != nil || !b.ok(v) {
		return fmt.Errorf("%q is not %s", s, b.expect())
	}
	*b.at(c) = v
	return nil
}

func (b bounded[T]) check(c *Config) error {
	switch v := *b.at(c); {
	case v < 0:
		return fmt.Errorf("%s is negative (the variable's range is %s)", b.show(v), b.rangeText())
	case v == 0 && b.lo > 0 && !b.off:
		return fmt.Errorf("%s is not a positive %s (the variable's range is %s)", b.show(v), strings.TrimPrefix(b.what, "a "), b.rangeText())
	}
	return nil
}

func (b bounded[T]) name() string { return b.field }

func (b bounded[T]) rangeText() string {
	r := b.show(b.lo) + "–" + b.show(b.hi)
	if b.off && b.lo > 0 {
		return b.show(0) + ", or " + r
	}
	return r
}

// duration binds a time.Duration field to the range lo–hi.
func duration(field string, at func(*Config) *time.Duration, lo, hi time.Duration) bounded[time.Duration] {
	return bounded[time.Duration]{field: field, at: at, lo: lo, hi: hi,
		parse: time.ParseDuration, show: FormatDuration, what: "a Go duration"}
}

// count binds an int field to the range lo–hi.
func count(field string, at func(*Config) *int, lo, hi int) bounded[int] {
	return bounded[int]{field: field, at: at, lo: lo, hi: hi,
		parse: strconv.Atoi, show: strconv.Itoa, what: "a whole number"}
}

// count64 binds an int64 field to the range lo–hi.
func count64(field string, at func(*Config) *int64, lo, hi int64) bounded[int64] {
	return bounded[int64]{field: field, at: at, lo: lo, hi: hi,
		parse: func(s string) (int64, error) { return strconv.ParseInt(s, 10, 64) },
		show:  func(n int64) string { return strconv.FormatInt(n, 10) }, what: "a whole number"}
}

// orOff returns b accepting 0 as "none" too.
func orOff[T number](b bounded[T]) bounded[T] { b.off = true; return b }

// text binds a string field; valid, when set, refuses bad values (its
// error says what is expected).
type text struct {
	field string
	at    func(*Config) *string
	valid func(string) error
}

func (t text) set(c *Config, s string) error {
	if t.valid != nil {
		if err := t.valid(s); err != nil {
			return err
		}
	}
	*t.at(c) = s
	return nil
}

func (t text) check(c *Config) error {
	if s := *t.at(c); t.valid != nil && s != "" {
		return t.valid(s)
	}
	return nil
}

func (t text) name() string      { return t.field }
func (t text) rangeText() string { return "" }

// custom binds a field whose parsing is its own (the function, the port,
// the log level).
type custom struct {
	field string
	parse func(c *Config, s string) error
	valid func(c *Config) error
}

func (u custom) set(c *Config, s string) error { return u.parse(c, s) }
func (u custom) check(c *Config) error {
	if u.valid == nil {
		return nil
	}
	return u.valid(c)
}
func (u custom) name() string      { return u.field }
func (u custom) rangeText() string { return "" }

// FormatDuration writes d as the table does: "24h", "1m", "100ms",
// without time.Duration.String's trailing zero units ("24h0m0s").
func FormatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}
