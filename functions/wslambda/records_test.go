package wslambda_test

import (
	"context"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/functions/wslambda"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/local/apigwws"
)

// TestDisconnectRacesOpen: an open that lands between $disconnect's read
// and its delete is not lost: the delete is conditional, and the session
// the open attached is ended too. A repeated $connect ends the old
// record's session as well.
func TestDisconnectRacesOpen(t *testing.T) {
	t.Parallel()
	var h *wslambda.Handler
	var once sync.Once
	const id = "race-conn="
	var opened *delivery.SessionState
	var s *stack
	s = startStackWith(t, 5, apigwws.Options{}, nil, func(hh *wslambda.Handler) {
		h = hh
		wslambda.BeforeDisconnectDelete(h, func() {
			once.Do(func() {
				_, err := h.Handle(context.Background(), message(id, `{"type":"open","stream":"durable","queue_id":"q-dis"}`, "open-1"))
				require.NoError(t, err)
				opened = s.state(t, id).Session
			})
		})
	})
	createQueue(t, s, "q-dis", "dis.x")
	res, err := h.Handle(t.Context(), lifecycle(id, "CONNECT"))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	_, err = h.Handle(t.Context(), lifecycle(id, "DISCONNECT"))
	require.NoError(t, err)
	require.NotNil(t, opened, "the open ran in between")
	_, err = s.app.Store().GetConnection(t.Context(), id)
	require.Equal(t, herr.NotFound, herr.CodeOf(err), "the record is gone")
	requireDetached(t, s, opened)

	// A repeated $connect of one id ends the old record's session.
	const id2 = "again-conn="
	_, err = h.Handle(t.Context(), lifecycle(id2, "CONNECT"))
	require.NoError(t, err)
	_, err = h.Handle(t.Context(), message(id2, `{"type":"open","stream":"durable","queue_id":"q-dis"}`, "open-2"))
	require.NoError(t, err)
	old := s.state(t, id2).Session
	require.NotNil(t, old)
	res, err = h.Handle(t.Context(), lifecycle(id2, "CONNECT"))
	require.NoError(t, err)
	require.Equal(t, http.StatusOK, res.StatusCode)
	require.Nil(t, s.state(t, id2).Session, "a fresh record")
	requireDetached(t, s, old)
}

// TestGhostWrites: a record write that landed although the handler was
// told it failed (Aborted) is not applied twice: the events keep one set
// of tags, and an ack of them settles them all.
func TestGhostWrites(t *testing.T) {
	t.Parallel()
	var ghosts atomic.Int64
	s := startStackWith(t, 5, apigwws.Options{}, nil, func(h *wslambda.Handler) { wslambda.GhostWrites(h, &ghosts) })
	createQueue(t, s, "q-ghost", "g.x")
	c := dialToken(t, s)
	c.send(`{"type":"open","id":"o","stream":"durable","queue_id":"q-ghost"}`)
	require.Equal(t, wsframe.TypeConnected, c.next().Type)
	id := s.onlyConnection(t)
	publish(t, s, "g.x", 3)

	ghosts.Store(1)
	c.send(`{"type":"demand","n":3}`)
	a := c.untilIdle(3)
	require.Len(t, a.events, 3)
	require.Equal(t, []int64{1, 2, 3}, []int64{a.events[0].DeliveryTag, a.events[1].DeliveryTag, a.events[2].DeliveryTag})
	st := s.state(t, id)
	require.Len(t, st.Session.Tags, 3, "one set of tags")
	require.EqualValues(t, 3, st.Session.NextTag)

	ghosts.Store(1)
	c.send(`{"type":"ack","id":"a","delivery_tags":[1,2,3]}`)
	f := c.next()
	require.Equal(t, wsframe.TypeSettled, f.Type, "%+v", f)
	require.Equal(t, 3, *f.Acked)
	require.Equal(t, 0, *f.Skipped)
	require.Empty(t, s.state(t, id).Session.Tags)
}
