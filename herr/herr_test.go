package herr_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"gocloud.dev/gcerrors"

	"github.com/heraldevents/herald/herr"
)

// TestCodeOf checks where a code comes from: the first *Error in the chain,
// then context errors, then gocloud codes.
func TestCodeOf(t *testing.T) {
	t.Parallel()
	require.Equal(t, herr.NotFound, herr.CodeOf(herr.New(herr.NotFound, "x")))
	wrapped := fmt.Errorf("outer: %w", herr.New(herr.OutOfRange, "limit"))
	require.Equal(t, herr.OutOfRange, herr.CodeOf(wrapped))
	// The outermost *Error wins over one inside it.
	require.Equal(t, herr.Unavailable, herr.CodeOf(herr.Wrap(herr.Unavailable, herr.New(herr.NotFound, "inner"), "outer")))

	require.Equal(t, herr.Canceled, herr.CodeOf(context.Canceled))
	require.Equal(t, herr.DeadlineExceeded, herr.CodeOf(fmt.Errorf("x: %w", context.DeadlineExceeded)))
	require.Equal(t, herr.Unknown, herr.CodeOf(errors.New("plain")))
	require.Equal(t, herr.Unknown, herr.CodeOf(nil))
}

// TestFromGocloud checks the translation of every gcerrors code.
func TestFromGocloud(t *testing.T) {
	t.Parallel()
	want := map[gcerrors.ErrorCode]herr.Code{
		gcerrors.OK:                 herr.Unknown,
		gcerrors.Unknown:            herr.Unknown,
		gcerrors.NotFound:           herr.NotFound,
		gcerrors.AlreadyExists:      herr.AlreadyExists,
		gcerrors.InvalidArgument:    herr.InvalidArgument,
		gcerrors.Internal:           herr.Internal,
		gcerrors.Unimplemented:      herr.Unimplemented,
		gcerrors.FailedPrecondition: herr.FailedPrecondition,
		gcerrors.PermissionDenied:   herr.PermissionDenied,
		gcerrors.ResourceExhausted:  herr.ResourceExhausted,
		gcerrors.Canceled:           herr.Canceled,
		gcerrors.DeadlineExceeded:   herr.DeadlineExceeded,
	}
	for in, out := range want {
		require.Equal(t, out, herr.FromGocloud(in), "%v", in)
	}
}

// TestMessageOf checks that only caller-safe messages come out.
func TestMessageOf(t *testing.T) {
	t.Parallel()
	secret := errors.New("connect to db://admin:hunter2@host failed")
	require.Equal(t, "lease store unavailable", herr.MessageOf(herr.Wrap(herr.Unavailable, secret, "lease store unavailable")))
	require.NotContains(t, herr.MessageOf(secret), "hunter2")
	require.Equal(t, "internal error", herr.MessageOf(secret))
	require.Equal(t, "the request was canceled", herr.MessageOf(context.Canceled))
	require.Equal(t, "the request timed out", herr.MessageOf(context.DeadlineExceeded))
	require.Equal(t, "a backend is unavailable; retry with backoff", herr.MessageOf(&herr.Error{Code: herr.Unavailable}))
	require.Equal(t, "not found", herr.MessageOf(&herr.Error{Code: herr.NotFound}))

	// Error() keeps the cause for logs; the message stays clean.
	err := herr.Wrap(herr.Internal, secret, "oops")
	require.Contains(t, err.Error(), "hunter2")
	require.True(t, errors.Is(err, secret))
	require.Equal(t, "limit is 5", herr.New(herr.OutOfRange, "limit is %d", 5).Error())
}

// TestRetryable checks which codes invite an unchanged retry.
func TestRetryable(t *testing.T) {
	t.Parallel()
	for c := herr.Code(0); c <= herr.Unimplemented; c++ {
		want := c == herr.Unavailable || c == herr.DeadlineExceeded || c == herr.Aborted || c == herr.ResourceExhausted
		require.Equal(t, want, herr.Retryable(herr.New(c, "x")), "%s", c)
	}
}

// TestCodeString checks that every code has a distinct snake_case name.
func TestCodeString(t *testing.T) {
	t.Parallel()
	seen := map[string]bool{}
	for c := herr.Code(0); c <= herr.Unimplemented; c++ {
		s := c.String()
		require.Regexp(t, `^[a-z]+(_[a-z]+)*$`, s)
		require.False(t, seen[s], "duplicate name %s", s)
		seen[s] = true
	}
	require.Equal(t, "code(99)", herr.Code(99).String())
}

// TestRetryAfter: WithRetryAfter sets the detail on a copy, RetryAfterOf
// finds it through wrapping, and errors without one report none.
func TestRetryAfter(t *testing.T) {
	t.Parallel()
	base := herr.New(herr.ResourceExhausted, "full")
	withDelay := herr.WithRetryAfter(base, 3*time.Second)
	d, ok := herr.RetryAfterOf(fmt.Errorf("outer: %w", withDelay))
	require.True(t, ok)
	require.Equal(t, 3*time.Second, d)
	_, ok = herr.RetryAfterOf(base)
	require.False(t, ok, "the original is not modified")
	_, ok = herr.RetryAfterOf(errors.New("plain"))
	require.False(t, ok)
	plain := errors.New("plain")
	require.Same(t, plain, herr.WithRetryAfter(plain, time.Second), "a non-herr error is returned unchanged")
	// An outer *Error without the detail does not hide an inner one.
	d, ok = herr.RetryAfterOf(herr.Wrap(herr.Unavailable, withDelay, "busy"))
	require.True(t, ok)
	require.Equal(t, 3*time.Second, d)
	require.Equal(t, herr.ResourceExhausted, herr.CodeOf(withDelay))
}
