package wslambda_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/wsframe"
	"github.com/heraldevents/herald/functions/wslambda"
	"github.com/heraldevents/herald/local/apigwws"
)

// TestTriageStateBounded: a dead_letters stream holds at most
// MaxTriageTags unacted tags (idle at the cap), and dead letters replayed
// or discarded leave its record: the record does not grow with every dead
// letter ever shown. A failed outcome post does not stop the later ones.
func TestTriageStateBounded(t *testing.T) {
	t.Parallel()
	const total, maxTags = 12, 5
	s := startStackWith(t, 1, apigwws.Options{}, func(cfg *wslambda.Config) { cfg.MaxTriageTags = maxTags }, nil)
	makeDeadLetters(t, s, "q-dl", "dl.x", total)
	c := dialToken(t, s)
	c.send(`{"type":"open","id":"o","stream":"dead_letters"}`)
	require.Equal(t, wsframe.TypeConnected, c.next().Type)
	id := s.onlyConnection(t)

	seen := map[string]bool{}
	for round := 0; len(seen) < total; round++ {
		require.Less(t, round, 10)
		c.send(`{"type":"demand","n":100}`)
		a := c.untilIdle(100)
		require.Len(t, a.events, min(maxTags, total-len(seen)), "round %d", round)
		require.Equal(t, 100-len(a.events), a.unmet)
		c.send(`{"type":"demand","n":1}`)
		require.Equal(t, 1, c.untilIdle(1).unmet, "at the cap, or nothing left: idle")
		var actions []string
		for _, e := range a.events {
			key := e.OriginQueue + e.DeadLetteredAt.String() + fmt.Sprint(e.Event.Message)
			require.False(t, seen[key], "shown once")
			seen[key] = true
			actions = append(actions, fmt.Sprintf(`{"delivery_tag":%d,"action":"DISCARD"}`, e.DeliveryTag))
		}
		if round == 0 {
			// The first outcome's post fails on every attempt: the
			// others still arrive.
			s.emu.FailNextPosts(wslambda.PostAttempts, http.StatusInternalServerError)
		}
		c.send(`{"type":"actions","id":"t","actions":[` + strings.Join(actions, ",") + `]}`)
		want := len(actions)
		if round == 0 {
			want--
		}
		for range want {
			f := c.next()
			require.Equal(t, wsframe.TypeOutcome, f.Type, "%+v", f)
			require.Equal(t, string(delivery.OutcomeDiscarded), f.Outcome)
		}
		st := s.state(t, id)
		require.Empty(t, st.DeadLetters.Tags)
		require.Empty(t, st.DeadLetters.Shown, "discarded dead letters are not kept")
	}
}

// TestTriagePrunesVanished: dead letters discarded elsewhere (another
// operator, another connection) leave this stream's state at its next
// demand, so the cap does not hold the stream idle for good.
func TestTriagePrunesVanished(t *testing.T) {
	t.Parallel()
	s := startStackWith(t, 1, apigwws.Options{}, func(cfg *wslambda.Config) { cfg.MaxTriageTags = 2 }, nil)
	makeDeadLetters(t, s, "q-dl2", "dl2.x", 4)
	c := dialToken(t, s)
	c.send(`{"type":"open","id":"o","stream":"dead_letters"}`)
	require.Equal(t, wsframe.TypeConnected, c.next().Type)
	id := s.onlyConnection(t)
	c.send(`{"type":"demand","n":10}`)
	a := c.untilIdle(10)
	require.Len(t, a.events, 2, "the cap")
	require.Equal(t, 8, a.unmet)

	var reqs []delivery.DeadLetterRequest
	for _, dl := range s.state(t, id).DeadLetters.Tags {
		reqs = append(reqs, delivery.DeadLetterRequest{ID: dl, Action: delivery.ActionDiscard})
	}
	_, err := s.app.Service().ActOnDeadLetters(t.Context(), root, reqs)
	require.NoError(t, err)

	c.send(`{"type":"demand","n":10}`)
	a = c.untilIdle(10)
	require.Len(t, a.events, 2, "the discarded ones were pruned: room for the others")
	require.EqualValues(t, 3, a.events[0].DeliveryTag)
	require.Len(t, s.state(t, id).DeadLetters.Tags, 2)
}
