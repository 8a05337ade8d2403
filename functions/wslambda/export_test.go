package wslambda

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

// GhostWrites makes the next n record writes of h land in the store but
// report herr.Aborted, as a write retried after a timeout whose retry
// then failed its condition. Set it before h handles events.
func GhostWrites(h *Handler, n *atomic.Int64) {
	h.writeHook = func(ctx context.Context, store *leasestore.Store, rec *leasestore.Connection) error {
		if err := store.UpdateConnection(ctx, rec); err != nil {
			return err
		}
		if n.Add(-1) >= 0 {
			return herr.New(herr.Aborted, "connection written by someone else (injected)")
		}
		return nil
	}
}

// BeforeDisconnectDelete makes h run f in $disconnect (and a repeated
// $connect) between reading the record and deleting it. Set it before h
// handles events.
func BeforeDisconnectDelete(h *Handler, f func()) { h.beforeDisconnectDelete = f }

// LogFatal runs the fatal path of connection id with state st and err,
// answering through post: what a stream failure logs.
func LogFatal(ctx context.Context, h *Handler, post Poster, id string, st *State, err error) {
	c := &conn{h: h, id: id, post: post, hardEnd: time.Now().Add(time.Minute)}
	c.setState(&leasestore.Connection{ID: id}, st)
	c.Fail(ctx, "", err)
}

// Lost is lost: whether an error ends the stream.
var Lost = lost
