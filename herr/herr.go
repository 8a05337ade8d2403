// Package herr is Herald's one error vocabulary.
//
// Every layer (pubsubx drivers, leasestore, delivery, functions) returns
// errors that carry a Code. The codes follow gocloud.dev/gcerrors (which in
// turn follows the gRPC canonical codes) and add the two distinctions the REST
// APIs need and gcerrors lacks: Unauthenticated, and Malformed (a request that
// is not well-formed, HTTP 400) versus InvalidArgument (well-formed but
// invalid, HTTP 422).
//
// Codes are mapped to HTTP statuses in exactly one place,
// functions/httpx.Status, and to gRPC statuses in exactly one place too.
//
// Messages in an *Error are safe to show to a caller: they never contain a
// secret. The wrapped cause (Err) is for logs only.
package herr

import (
	"context"
	"errors"
	"fmt"
	"time"

	"gocloud.dev/gcerrors"
)

// Code classifies an error. The zero value is Unknown.
type Code int

// The codes. Keep this list in step with functions/httpx.Status.
const (
	Unknown            Code = iota // an unexpected failure; HTTP 500
	Malformed                      // not well-formed (bad JSON, bad query syntax); HTTP 400
	InvalidArgument                // well-formed but invalid; HTTP 422 on the notifications API
	OutOfRange                     // a parameter outside its documented range; HTTP 400 (the durable-consumer API)
	Unauthenticated                // no or wrong credentials; HTTP 401
	PermissionDenied               // authenticated, not allowed; HTTP 403
	NotFound                       // HTTP 404
	AlreadyExists                  // HTTP 409
	FailedPrecondition             // state forbids the call (a paused consumer); HTTP 409
	Aborted                        // a conditional write lost a race too often; HTTP 409
	ResourceExhausted              // a window or quota is full; HTTP 429
	Unavailable                    // a backend cannot be reached; retry; HTTP 503
	DeadlineExceeded               // HTTP 504
	Canceled                       // the caller went away; HTTP 499
	Internal                       // a broken invariant; HTTP 500
	Unimplemented                  // HTTP 501
)

var codeNames = [...]string{
	Unknown:            "unknown",
	Malformed:          "malformed",
	InvalidArgument:    "invalid_argument",
	OutOfRange:         "out_of_range",
	Unauthenticated:    "unauthenticated",
	PermissionDenied:   "permission_denied",
	NotFound:           "not_found",
	AlreadyExists:      "already_exists",
	FailedPrecondition: "failed_precondition",
	Aborted:            "aborted",
	ResourceExhausted:  "resource_exhausted",
	Unavailable:        "unavailable",
	DeadlineExceeded:   "deadline_exceeded",
	Canceled:           "canceled",
	Internal:           "internal",
	Unimplemented:      "unimplemented",
}

// String returns the snake_case name used in JSON error bodies.
func (c Code) String() string {
	if c >= 0 && int(c) < len(codeNames) {
		return codeNames[c]
	}
	return fmt.Sprintf("code(%d)", int(c))
}

// Error is a coded error. Message is shown to callers; Err is the cause, kept
// for logs and errors.Is/As.
type Error struct {
	Code    Code
	Message string
	Err     error
	// Field, when set, names the offending request field as a path of
	// member names (strings) and array indices (ints) from the request's
	// root, e.g. ["body", "event", "event_type"]: the notifications API's
	// 422 body reports it as a validation error's `loc`. Set it with
	// InField.
	Field []any
	// RetryAfter, when positive, is how long the caller should wait before
	// retrying (REST answers send it as Retry-After, in whole seconds
	// rounded up). Set it with WithRetryAfter; read it with RetryAfterOf.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Err != nil {
		return e.Message + ": " + e.Err.Error()
	}
	return e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// New returns an *Error with a formatted, caller-safe message.
func New(code Code, format string, args ...any) error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Wrap returns an *Error that keeps cause for logs and shows only message.
func Wrap(code Code, cause error, message string) error {
	return &Error{Code: code, Message: message, Err: cause}
}

// InField returns err with path put in front of the field it names (see
// Error.Field): a validator sets the field it checked ("event_type"), and
// its caller adds where that value sits in the request ("body", "event").
// An error that is not an *Error, or nil, is returned unchanged; err itself
// is never modified.
func InField(err error, path ...any) error {
	var he *Error
	if !errors.As(err, &he) {
		return err
	}
	out := *he
	out.Field = append(append(make([]any, 0, len(path)+len(he.Field)), path...), he.Field...)
	return &out
}

// WithRetryAfter returns err with a retry-after detail of d (see
// Error.RetryAfter): the first *Error in its chain, copied, with RetryAfter
// set. An error that is not an *Error, or nil, is returned unchanged; err
// itself is never modified.
func WithRetryAfter(err error, d time.Duration) error {
	var he *Error
	if !errors.As(err, &he) {
		return err
	}
	out := *he
	out.RetryAfter = d
	return &out
}

// RetryAfterOf returns the retry-after detail of the first *Error in err's
// chain that has one, and whether there is one.
func RetryAfterOf(err error) (time.Duration, bool) {
	for err != nil {
		var he *Error
		if !errors.As(err, &he) {
			return 0, false
		}
		if he.RetryAfter > 0 {
			return he.RetryAfter, true
		}
		err = he.Err
	}
	return 0, false
}

// FieldOf returns the field path of the first *Error in err's chain, or
// nil when it names none.
func FieldOf(err error) []any {
	var he *Error
	if errors.As(err, &he) {
		return he.Field
	}
	return nil
}

// CodeOf reports the Code of err: the code of the first *Error in its chain,
// else the gocloud.dev gcerrors code translated, else context errors, else
// Unknown. CodeOf(nil) is Unknown; callers check for nil first.
func CodeOf(err error) Code {
	var he *Error
	if errors.As(err, &he) {
		return he.Code
	}
	switch {
	case errors.Is(err, context.Canceled):
		return Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return DeadlineExceeded
	}
	return FromGocloud(gcerrors.Code(err))
}

// MessageOf returns the caller-safe message of err: the Message of the first
// *Error in its chain, or a generic text for its code. Raw causes are never
// returned, since they may carry backend details or secrets.
func MessageOf(err error) string {
	var he *Error
	if errors.As(err, &he) && he.Message != "" {
		return he.Message
	}
	switch CodeOf(err) {
	case Unavailable:
		return "a backend is unavailable; retry with backoff"
	case DeadlineExceeded:
		return "the request timed out"
	case Canceled:
		return "the request was canceled"
	case NotFound:
		return "not found"
	default:
		return "internal error"
	}
}

// FromGocloud translates a gocloud.dev error code.
func FromGocloud(c gcerrors.ErrorCode) Code {
	switch c {
	case gcerrors.OK:
		return Unknown
	case gcerrors.NotFound:
		return NotFound
	case gcerrors.AlreadyExists:
		return AlreadyExists
	case gcerrors.InvalidArgument:
		return InvalidArgument
	case gcerrors.Internal:
		return Internal
	case gcerrors.Unimplemented:
		return Unimplemented
	case gcerrors.FailedPrecondition:
		return FailedPrecondition
	case gcerrors.PermissionDenied:
		return PermissionDenied
	case gcerrors.ResourceExhausted:
		return ResourceExhausted
	case gcerrors.Canceled:
		return Canceled
	case gcerrors.DeadlineExceeded:
		return DeadlineExceeded
	default:
		return Unknown
	}
}

// Retryable reports whether a caller may retry the same request unchanged.
func Retryable(err error) bool {
	switch CodeOf(err) {
	case Unavailable, DeadlineExceeded, Aborted, ResourceExhausted:
		return true
	}
	return false
}
