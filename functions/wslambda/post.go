package wslambda

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/functions/wslambda/apigwmgmt"
	"github.com/heraldevents/herald/herr"
)

// redact cuts the reconnect tokens c knows of out of s.
func (c *conn) redact(s string) string { return redactTokens(s, c.secrets) }

func redactTokens(s string, tokens []string) string {
	for _, t := range tokens {
		if t != "" {
			s = strings.ReplaceAll(s, t, delivery.RedactQueue(delivery.NonDurable, t))
		}
	}
	return s
}

// errAttrs are the attributes of a log line about err: its herr code, its
// caller-safe message, and its cause chain with the reconnect tokens c
// knows of cut out; plus the stream's queue (a non-durable queue by a
// prefix of its id, delivery.RedactQueue).
func (c *conn) errAttrs(err error) []any {
	attrs := []any{"connection", c.id, "code", herr.CodeOf(err).String(), "err", c.redact(herr.MessageOf(err)), "cause", c.redact(err.Error())}
	if c.st != nil && c.st.Session != nil {
		attrs = append(attrs, "queue", delivery.RedactQueue(c.st.Session.Kind, c.st.Session.Queue))
	}
	return attrs
}

// send posts one frame that answers the client (not an event): false when
// the client is gone or the post failed (logged).
func (c *conn) send(ctx context.Context, f *wsframe.ServerFrame) bool {
	return c.postFrame(ctx, f, c.hardEnd) == nil
}

// postFrame posts one frame before until, retrying a throttled or failed
// post (429, 5xx, unreachable: herr.Unavailable) with a short backoff
// while time is left, at most PostAttempts times. It returns the
// management API's last error (apigwmgmt.ErrGone when the client left);
// failures other than a gone client are logged.
func (c *conn) postFrame(ctx context.Context, f *wsframe.ServerFrame, until time.Time) error {
	data := f.Encode()
	pause := 50 * time.Millisecond
	var err error
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithDeadline(ctx, minTime(time.Now().Add(PostTimeout), until))
		err = c.post.PostToConnection(pctx, c.id, data)
		cancel()
		if err == nil || errors.Is(err, apigwmgmt.ErrGone) {
			return err
		}
		if herr.CodeOf(err) != herr.Unavailable || attempt >= PostAttempts || !time.Now().Add(pause).Before(until) {
			break
		}
		t := time.NewTimer(pause)
		select {
		case <-ctx.Done():
			t.Stop()
			return err
		case <-t.C:
		}
		pause *= 2
	}
	c.h.log.WarnContext(ctx, "websocket: posting a frame failed", append(c.errAttrs(err), "type", f.Type)...)
	return err
}

// tooLarge reports whether a post failed because the message is over API
// Gateway's limit (413, or apigwmgmt's own check before sending).
func tooLarge(err error) bool {
	var apiErr *apigwmgmt.APIError
	if errors.As(err, &apiErr) {
		return apiErr.Status == http.StatusRequestEntityTooLarge
	}
	return herr.CodeOf(err) == herr.InvalidArgument
}

// Refuse answers a frame with a non-fatal error frame.
func (c *conn) Refuse(ctx context.Context, id string, err error) {
	c.send(ctx, wsframe.Error(id, err, false))
}

// Fail posts a fatal error frame, then deletes the connection; its
// $disconnect ends the session and removes the record.
func (c *conn) Fail(ctx context.Context, id string, err error) {
	if herr.CodeOf(err) == herr.Unknown || herr.CodeOf(err) == herr.Internal {
		c.h.log.WarnContext(ctx, "websocket stream failed", c.errAttrs(err)...)
	}
	c.send(ctx, wsframe.Error(id, err, true))
	dctx, cancel := context.WithDeadline(ctx, minTime(time.Now().Add(PostTimeout), c.hardEnd))
	defer cancel()
	if err := c.post.DeleteConnection(dctx, c.id); err != nil && !errors.Is(err, apigwmgmt.ErrGone) {
		c.h.log.WarnContext(ctx, "websocket: deleting the connection failed", c.errAttrs(err)...)
	}
}
