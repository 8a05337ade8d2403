package wslambda

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore"
)

// Principal is a stored principal: what authorizes the connection's
// frames until it reconnects.
type Principal struct {
	ID          string   `json:"id"`
	Permissions []string `json:"permissions"`
}

// State is a connection record's Data, as JSON.
type State struct {
	Principal Principal `json:"principal"`
	// Stream is "" until an open frame opened one, then wsframe's stream
	// kind: non_durable, durable or dead_letters.
	Stream string `json:"stream,omitempty"`
	// Session is the event stream's session (non_durable, durable).
	Session *delivery.SessionState `json:"session,omitempty"`
	// DeadLetters is the triage bookkeeping of a dead_letters stream:
	// delivery's rules (every dead letter shown once per connection with
	// the next tag; a tag retired when its dead letter is replayed or
	// discarded), bounded here to Config.MaxTriageTags tags and pruned of
	// the ids a complete listing no longer holds (replayed or discarded
	// elsewhere, expired).
	DeadLetters *delivery.TriageState `json:"dead_letters,omitempty"`
	// Writes are the ids of the last 8 writes of the record (an
	// invocation's API Gateway requestId and a count), so that an
	// invocation told its conditional write failed can see it landed and
	// not apply its change twice. Absent in records of older versions.
	Writes []string `json:"writes,omitempty"`
}

func (s *State) principal() *auth.Principal {
	return &auth.Principal{ID: s.Principal.ID, Permissions: s.Principal.Permissions}
}

func decodeState(c *leasestore.Connection) (*State, error) {
	var st State
	if err := json.Unmarshal(c.Data, &st); err != nil {
		return nil, herr.Wrap(herr.Internal, err, "the connection record does not hold a connection state")
	}
	return &st, nil
}

// maxWriteIDs is how many write ids State.Writes keeps.
const maxWriteIDs = 8

// update applies change to the connection's state and writes it
// conditionally; when another invocation wrote first it re-reads the
// record and applies change again to the fresh state. change may refuse
// (its error is returned and nothing is written). On success c.rec and
// c.st are the written record and state.
//
// Every write carries a write id of its own in State.Writes: when a write
// is reported lost (Aborted) although it landed (a store call retried
// after a timeout, whose retry then failed its condition), the re-read
// record carries that id, and the write counts as done — change is not
// applied a second time.
func (c *conn) update(ctx context.Context, change func(st *State) error) error {
	for attempt := 0; ; attempt++ {
		if err := change(c.st); err != nil {
			return err
		}
		c.writes++
		wid := fmt.Sprintf("%s/%d", c.writeID, c.writes)
		c.st.Writes = append(c.st.Writes, wid)
		if n := len(c.st.Writes); n > maxWriteIDs {
			c.st.Writes = slices.Clone(c.st.Writes[n-maxWriteIDs:])
		}
		data, err := json.Marshal(c.st)
		if err != nil {
			return herr.Wrap(herr.Internal, err, "cannot encode the connection state")
		}
		if len(data) > leasestore.MaxConnectionData {
			return herr.New(herr.ResourceExhausted, "the connection's state is full (%d bytes): settle events, or reconnect", len(data))
		}
		c.rec.Data = data
		write := c.h.cfg.Store.UpdateConnection
		if c.h.writeHook != nil {
			write = func(ctx context.Context, rec *leasestore.Connection) error {
				return c.h.writeHook(ctx, c.h.cfg.Store, rec)
			}
		}
		err = write(ctx, c.rec)
		if err == nil {
			return nil
		}
		if herr.CodeOf(err) != herr.Aborted || attempt+1 >= maxCASAttempts {
			return err
		}
		rec, gerr := c.h.cfg.Store.GetConnection(ctx, c.id)
		if gerr != nil {
			return gerr
		}
		st, derr := decodeState(rec)
		if derr != nil {
			return derr
		}
		c.setState(rec, st)
		if slices.Contains(st.Writes, wid) {
			return nil // our write landed after all
		}
	}
}
