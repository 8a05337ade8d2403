package leasestore

import (
	"context"
	"encoding/json"
	"strings"
	"time"

	"gocloud.dev/gcerrors"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/telemetry"
)

// Process records: one per Herald process that runs a hub
// (docs/streams-at-scale.md). A process writes its record when it starts
// and at every heartbeat; the heartbeat's time says it is alive, and the
// record is its mailbox: other processes post notices into it (a queue
// they want, a session to evict) and the process takes them at its next
// heartbeat. One write per process per heartbeat, whatever its streams.

const kindProcess = "process"

func processKey(id string) string { return "h:" + id }

// MaxNotices is the most notices a process record holds; Notify refuses
// more (herr.ResourceExhausted) until the process takes them.
const MaxNotices = 500

// Process is a Herald process's record.
type Process struct {
	// ID names the process (a random id it picked at start); 1–200 bytes
	// without '/'.
	ID string
	// Subscription is the process's hub subscription, which the reaper
	// deletes once the process is dead.
	Subscription string
	// Started and Heartbeat are when the process registered and last
	// wrote its record (the store's clock, ms precision).
	Started, Heartbeat time.Time
}

// Notice kinds.
const (
	// NoticeClaim: process From holds a stream for hub queue Queue, whose
	// home is the process the notice is for.
	NoticeClaim = "claim"
	// NoticeEvict: end the streams of hub queue Queue as the broker
	// cancelling their consumer would (EvictSessions of a hub queue).
	NoticeEvict = "evict"
	// NoticeGone: hub queue Queue was deleted (the reaper took its home
	// for dead): end its streams as a deleted queue's.
	NoticeGone = "gone"
)

// Notice is a message from one process to another through the store.
type Notice struct {
	Kind  string    `json:"k"`
	Queue string    `json:"q"`
	From  string    `json:"f,omitempty"`
	At    time.Time `json:"t"`
}

type processDoc struct {
	Key          string `docstore:"key"`
	Kind         string `docstore:"kind"`
	ID           string `docstore:"id"`
	Subscription string `docstore:"sub"`
	Started      int64  `docstore:"started_ms"`
	Heartbeat    int64  `docstore:"beat_ms"`
	// Notices is a JSON array of Notice ("" for none): rare, small, and
	// one attribute on every backend.
	Notices string `docstore:"notices"`

	DocstoreRevision any
}

func (d *processDoc) view() *Process {
	return &Process{
		ID: d.ID, Subscription: d.Subscription,
		Started: time.UnixMilli(d.Started).UTC(), Heartbeat: time.UnixMilli(d.Heartbeat).UTC(),
	}
}

func checkProcessID(id string) error {
	if id == "" || len(id) > 200 || strings.ContainsRune(id, '/') {
		return herr.New(herr.InvalidArgument, "a process id is 1–200 bytes without '/'")
	}
	return nil
}

// RegisterProcess creates p's record with its heartbeat now. Errors:
// herr.InvalidArgument for a bad id; herr.AlreadyExists when the id is
// taken.
func (s *Store) RegisterProcess(ctx context.Context, p Process) (err error) {
	ctx, span := telemetry.StartStore(ctx, "register_process")
	defer func() { span.End(ctx, err) }()
	if err := checkProcessID(p.ID); err != nil {
		return err
	}
	now := s.nowMs()
	d := &processDoc{Key: processKey(p.ID), Kind: kindProcess, ID: p.ID, Subscription: p.Subscription, Started: now, Heartbeat: now}
	if err := s.coll.Create(ctx, d); err != nil {
		if gcerrors.Code(err) == gcerrors.AlreadyExists {
			return herr.New(herr.AlreadyExists, "process %q is registered already", p.ID)
		}
		return storeErr(err)
	}
	return nil
}

// Heartbeat marks process id alive now and takes the notices posted to it
// (they are removed from its record by the same write), oldest first.
// Errors: herr.NotFound when the record is gone (the reaper took the
// process for dead: it must stop serving its hub queues).
func (s *Store) Heartbeat(ctx context.Context, id string) (notices []Notice, err error) {
	ctx, span := telemetry.StartStore(ctx, "heartbeat")
	defer func() { span.End(ctx, err) }()
	err = s.retry(ctx, func() (bool, error) {
		d, err := s.getProcess(ctx, id)
		if err != nil {
			return false, err
		}
		notices = nil
		if d.Notices != "" {
			if err := json.Unmarshal([]byte(d.Notices), &notices); err != nil {
				return false, herr.Wrap(herr.Internal, err, "a process record's notices are corrupt")
			}
		}
		d.Heartbeat, d.Notices = max(s.nowMs(), d.Heartbeat), ""
		return s.commit(ctx, "", write{doc: d})
	})
	return notices, err
}

// Notify posts n into process's mailbox (n.At defaults to now). Errors:
// herr.NotFound for an unknown process; herr.ResourceExhausted when it
// holds MaxNotices already.
func (s *Store) Notify(ctx context.Context, process string, n Notice) (err error) {
	ctx, span := telemetry.StartStore(ctx, "notify")
	defer func() { span.End(ctx, err) }()
	if n.At.IsZero() {
		n.At = s.opts.Now().UTC()
	}
	return s.retry(ctx, func() (bool, error) {
		d, err := s.getProcess(ctx, process)
		if err != nil {
			return false, err
		}
		var ns []Notice
		if d.Notices != "" {
			if err := json.Unmarshal([]byte(d.Notices), &ns); err != nil {
				return false, herr.Wrap(herr.Internal, err, "a process record's notices are corrupt")
			}
		}
		if len(ns) >= MaxNotices {
			return false, herr.New(herr.ResourceExhausted, "process %q has %d notices waiting", process, len(ns))
		}
		b, err := json.Marshal(append(ns, n))
		if err != nil {
			return false, herr.Wrap(herr.Internal, err, "encode notices")
		}
		d.Notices = string(b)
		return s.commit(ctx, "", write{doc: d})
	})
}

// GetProcess returns process id's record, or herr.NotFound.
func (s *Store) GetProcess(ctx context.Context, id string) (*Process, error) {
	d, err := s.getProcess(ctx, id)
	if err != nil {
		return nil, err
	}
	return d.view(), nil
}

func (s *Store) getProcess(ctx context.Context, id string) (*processDoc, error) {
	if err := checkProcessID(id); err != nil {
		return nil, err
	}
	d := &processDoc{Key: processKey(id)}
	if err := s.coll.Get(ctx, d); err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, herr.New(herr.NotFound, "process %q is not registered", id)
		}
		return nil, storeErr(err)
	}
	return d, nil
}

// ListProcesses returns every process record, in no particular order.
func (s *Store) ListProcesses(ctx context.Context) ([]*Process, error) {
	var out []*Process
	err := eachOfKind(ctx, s, kindProcess, func(d *processDoc) error {
		out = append(out, d.view())
		return nil
	})
	return out, err
}

// DeleteProcess deletes process id's record, if its heartbeat is still
// at most before (zero: whatever it is), so that the reaper does not
// delete the record of a process that came back to life. Deleting a
// record that is gone is not an error.
func (s *Store) DeleteProcess(ctx context.Context, id string, before time.Time) error {
	return s.retry(ctx, func() (bool, error) {
		d, err := s.getProcess(ctx, id)
		if herr.CodeOf(err) == herr.NotFound {
			return true, nil
		}
		if err != nil {
			return false, err
		}
		if !before.IsZero() && d.Heartbeat > before.UnixMilli() {
			return true, nil
		}
		return s.commit(ctx, "", write{doc: d, delete: true})
	})
}
