package cli

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/spf13/cobra"

	"github.com/heraldevents/herald/client"
	"github.com/heraldevents/herald/internal/strictjson"
)

// maxLineBytes bounds one line of a --file: an event's message is at most
// 256 KiB, and the line carries the rest of the event around it.
const maxLineBytes = 512 << 10

func (a *app) publishCmd() *cobra.Command {
	var typ, resource, data, occurred, file, key string
	cmd := &cobra.Command{
		Use:   "publish",
		Short: "Publish one event, or a file of events (one JSON event a line)",
		Long: `publish sends one event (--type, with --resource, --data and --time), or
every event of --file (- for standard input): one JSON object a line, either
the notifications API's Event ({"event_type", "message", "occurred_at",
"resource": {"resource_id"}}, and optionally "idempotency_key", the event's
own key: publishing the line again answers its first result) or a CloudEvent
in structured JSON ({"specversion", "type", "subject", "time", "data"}). A
file goes in batches
of 100, with a progress bar on a terminal, and ends with a summary of what
failed; the exit code is 1 when any event was not published.`,
		Example: `  herald publish --type myapp.user.created --resource /users/123 --data '{"user_id": "123"}'
  herald publish --file events.jsonl
  generate-events | herald publish --file -`,
		Args: exactArgs(0, "no arguments: use --type or --file"),
		RunE: run(func(cmd *cobra.Command, _ []string) error {
			switch {
			case file != "" && (typ != "" || resource != "" || data != "" || occurred != ""):
				return usagef("--file cannot be combined with --type, --resource, --data or --time")
			case file != "" && key != "":
				// Not ignored: a file goes in several batches, and each
				// event's own key is what makes a resend safe.
				return usagef("--idempotency-key applies to --type; give the lines of --file an idempotency_key each")
			case file != "":
				return a.publishFile(cmd, file)
			case typ == "":
				return usagef("publish needs --type (or --file)")
			}
			e := event.New()
			e.SetType(typ)
			if resource != "" {
				e.SetSubject(resource)
			}
			if occurred != "" {
				t, err := time.Parse(time.RFC3339Nano, occurred)
				if err != nil {
					return usagef("--time must be RFC 3339, such as 2024-10-16T14:30:00Z")
				}
				e.SetTime(t)
			}
			if data != "" {
				if !json.Valid([]byte(data)) {
					return usagef("--data is not valid JSON")
				}
				e.DataEncoded = []byte(data)
				e.SetDataContentType(event.ApplicationJSON)
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			defer c.Close()
			ctx := cmd.Context()
			if key != "" {
				ctx = client.WithIdempotencyKey(ctx, key)
			}
			res, err := c.Publish(ctx, e)
			if err != nil {
				return err
			}
			if a.structured() {
				if err := a.emit(resultJSON(res)); err != nil {
					return err
				}
			} else if res.Success {
				fmt.Fprintf(a.io.Out, "published %s %s\n", res.Event.Type(), res.Event.Time().UTC().Format(time.RFC3339Nano))
			}
			if !res.Success {
				return fmt.Errorf("not published: %s", res.FailureReason)
			}
			return nil
		}),
	}
	f := cmd.Flags()
	f.StringVar(&typ, "type", "", "event type, e.g. myapp.user.created")
	f.StringVar(&resource, "resource", "", "resource id, e.g. /users/123 (the CloudEvents subject)")
	f.StringVar(&data, "data", "", "the message, a JSON object")
	f.StringVar(&occurred, "time", "", "when it occurred, RFC 3339 (default: the publish time)")
	f.StringVar(&file, "file", "", "a file of events, one JSON object a line (- for standard input)")
	f.StringVar(&key, "idempotency-key", "", "the publish's Idempotency-Key: publishing again with it answers the first result (default: a new one per invocation, kept across retries)")
	return cmd
}

// publishResult is the JSON form of one result.
type publishResult struct {
	Line          int             `json:"line,omitempty"`
	EventType     string          `json:"event_type"`
	ResourceID    string          `json:"resource_id,omitempty"`
	OccurredAt    string          `json:"occurred_at,omitempty"`
	Message       json.RawMessage `json:"message,omitempty"`
	Success       bool            `json:"success"`
	FailureReason string          `json:"failure_reason,omitempty"`
}

func resultJSON(r client.PublishResult) publishResult {
	out := publishResult{EventType: r.Event.Type(), ResourceID: r.Event.Subject(), Success: r.Success,
		FailureReason: r.FailureReason, Message: json.RawMessage(r.Event.Data())}
	if t := r.Event.Time(); !t.IsZero() {
		out.OccurredAt = t.UTC().Format(time.RFC3339Nano)
	}
	if len(out.Message) == 0 {
		out.Message = nil
	}
	return out
}

// fileLine is a line of a --file in the notifications API's shape (a
// CloudEvent line is told apart by its specversion member).
type fileLine struct {
	EventType  string          `json:"event_type"`
	Message    json.RawMessage `json:"message"`
	OccurredAt string          `json:"occurred_at"`
	Resource   *struct {
		ResourceID string `json:"resource_id"`
	} `json:"resource"`
	// IdempotencyKey is the event's own key (client.KeyedEvent).
	IdempotencyKey *string `json:"idempotency_key"`
}

// parseLine reads one line as an event, and its idempotency_key ("" for
// none; only a notifications-API line has one). A notifications-API line
// is decoded by the strict rules the server applies (internal/strictjson):
// a member that is misspelt or in the wrong case ("mesage", "Event_Type")
// is an error, not silently dropped.
func parseLine(b []byte) (event.Event, string, error) {
	var members map[string]json.RawMessage
	if err := strictjson.Unmarshal(b, &members); err != nil {
		return event.Event{}, "", fmt.Errorf("not a JSON object: %v", err)
	}
	if _, ok := members["specversion"]; ok {
		var e event.Event
		if err := json.Unmarshal(b, &e); err != nil {
			return e, "", fmt.Errorf("not a CloudEvent: %v", err)
		}
		return e, "", nil
	}
	var l fileLine
	if err := strictjson.Unmarshal(b, &l); err != nil {
		return event.Event{}, "", fmt.Errorf("not an event of the notifications API: %v", err)
	}
	key := ""
	if l.IdempotencyKey != nil {
		key = *l.IdempotencyKey
		if err := client.CheckIdempotencyKey(key); err != nil {
			return event.Event{}, "", fmt.Errorf("idempotency_key: %v", err)
		}
	}
	e := event.New()
	e.SetType(l.EventType)
	if l.Resource != nil && l.Resource.ResourceID != "" {
		e.SetSubject(l.Resource.ResourceID)
	}
	if l.OccurredAt != "" {
		t, err := time.Parse(time.RFC3339Nano, l.OccurredAt)
		if err != nil {
			return e, "", fmt.Errorf("occurred_at is not RFC 3339")
		}
		e.SetTime(t)
	}
	if len(l.Message) > 0 && string(l.Message) != "null" {
		e.DataEncoded = l.Message
		e.SetDataContentType(event.ApplicationJSON)
	}
	return e, key, nil
}

func (a *app) publishFile(cmd *cobra.Command, name string) error {
	var r io.Reader = a.io.In
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return usagef("--file: %v", err)
		}
		defer f.Close()
		r = f
	}
	var events []event.Event
	var keys []string // each event's idempotency_key ("": none)
	var lines []int
	keyed := false
	keyLine := map[string]int{} // an idempotency_key's first line
	var failures []publishResult
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxLineBytes)
	for n := 1; sc.Scan(); n++ {
		b := sc.Bytes()
		if len(trimSpace(b)) == 0 {
			continue
		}
		e, key, err := parseLine(b)
		if first, ok := keyLine[key]; err == nil && key != "" && ok {
			err = fmt.Errorf("idempotency_key is also on line %d: each event's key must be its own", first)
		}
		if err != nil {
			failures = append(failures, publishResult{Line: n, FailureReason: err.Error()})
			continue
		}
		if key != "" {
			keyLine[key] = n
		}
		events, keys, lines = append(events, e), append(keys, key), append(lines, n)
		keyed = keyed || key != ""
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("--file: %v (a line holds at most %d bytes)", err, maxLineBytes)
	}
	c, err := a.client()
	if err != nil {
		return err
	}
	defer c.Close()
	bar := newProgress(a.io.Err, len(events), "publishing")
	published, answered := 0, 0
	var sendErr error
	for start := 0; start < len(events); start += client.MaxBatch {
		end := min(start+client.MaxBatch, len(events))
		var res []client.PublishResult
		if keyed {
			// Lines with keys of their own: every event of the file goes
			// under its own key (a random one, kept across retries, for
			// a line without).
			batch := make([]client.KeyedEvent, end-start)
			for i := range batch {
				batch[i] = client.KeyedEvent{Event: events[start+i], Key: keys[start+i]}
			}
			res, err = c.PublishBatchKeyed(cmd.Context(), batch)
		} else {
			res, err = c.PublishBatch(cmd.Context(), events[start:end])
		}
		answered += len(res)
		for i, r := range res {
			if r.Success {
				published++
				continue
			}
			pr := resultJSON(r)
			// What the line said: a failed event's answer replaces an
			// invalid member with a placeholder ("-" for the type).
			pr.Line, pr.EventType = lines[start+i], events[start+i].Type()
			failures = append(failures, pr)
		}
		bar.set(end)
		if err != nil {
			sendErr = err
			break
		}
	}
	bar.done()
	notSent := len(events) - answered
	if a.structured() {
		if err := a.emit(map[string]any{"published": published, "failed": len(failures), "not_sent": notSent, "failures": nonNilResults(failures)}); err != nil {
			return err
		}
	} else {
		fmt.Fprintf(a.io.Out, "published %d, failed %d", published, len(failures))
		if notSent > 0 {
			fmt.Fprintf(a.io.Out, ", not sent %d", notSent)
		}
		fmt.Fprintln(a.io.Out)
		if len(failures) > 0 {
			t := newTable(a.io.Out, "LINE", "TYPE", "REASON")
			for _, f := range failures {
				t.row(fmt.Sprint(f.Line), f.EventType, f.FailureReason)
			}
			if err := t.flush(); err != nil {
				return err
			}
		}
	}
	if sendErr != nil {
		return sendErr
	}
	if len(failures) > 0 {
		return partialError{fmt.Errorf("%d events not published", len(failures))}
	}
	return nil
}

func nonNilResults(rs []publishResult) []publishResult {
	if rs == nil {
		return []publishResult{}
	}
	return rs
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r') {
		b = b[:len(b)-1]
	}
	return b
}
