package leasestore

import (
	"context"
	"encoding/base64"
	"errors"
	"time"

	"gocloud.dev/gcerrors"

	"github.com/heraldevents/herald/herr"
)

// Connection records: the state of the API Gateway WebSocket bridge, which
// runs as a Lambda per event and keeps nothing in memory between them
// (docs/streams-design.md, "Connection records and stateless sessions").

// Connection limits.
const (
	// MaxConnectionIDLength is the longest connection id, in bytes. API
	// Gateway's connectionIds are far shorter (about 16 characters); the
	// bound keeps record keys well inside DynamoDB's 2,048-byte and
	// Firestore's 1,500-byte key limits.
	MaxConnectionIDLength = 128
	// MaxConnectionData is the most bytes of Connection.Data, below
	// DynamoDB's 400 KB item limit (and Firestore's 1 MiB document limit)
	// with room for the record's other fields.
	MaxConnectionData = 300_000
)

// Connection is the stored state of one WebSocket connection of the API
// Gateway bridge: a record of kind "wsconnection" keyed "w:<id in
// unpadded base64url>" (so that any id, '/' included, is a valid key on
// every backend).
type Connection struct {
	// ID is the API Gateway connectionId: 1–MaxConnectionIDLength bytes,
	// else herr.InvalidArgument.
	ID string
	// Data is the bridge's state, opaque to the store: at most
	// MaxConnectionData bytes, else herr.InvalidArgument. An empty Data
	// may read back as nil.
	Data []byte
	// CreatedAt is when CreateConnection stored the record (the store's
	// clock, Options.Now; millisecond precision, UTC).
	CreatedAt time.Time
	// UpdatedAt is the time of the record's last write (create or update;
	// millisecond precision, UTC). ReapConnections ages records by it.
	UpdatedAt time.Time

	// revision is the docstore revision of the record as read, for the
	// conditional write of UpdateConnection.
	revision any
}

// connectionDoc is the stored form of a Connection.
type connectionDoc struct {
	Key       string `docstore:"key"`
	Kind      string `docstore:"kind"`
	ID        string `docstore:"id"`
	Data      []byte `docstore:"data"`
	CreatedAt int64  `docstore:"created_ms"` // Unix ms
	UpdatedAt int64  `docstore:"updated_ms"` // Unix ms

	DocstoreRevision any
}

const (
	kindConnection   = "wsconnection"
	connectionPrefix = "w:"
)

func connectionKey(id string) string {
	return connectionPrefix + base64.RawURLEncoding.EncodeToString([]byte(id))
}

func (d *connectionDoc) view() *Connection {
	return &Connection{
		ID: d.ID, Data: d.Data,
		CreatedAt: time.UnixMilli(d.CreatedAt).UTC(), UpdatedAt: time.UnixMilli(d.UpdatedAt).UTC(),
		revision: d.DocstoreRevision,
	}
}

func checkConnection(id string, data []byte) error {
	if id == "" || len(id) > MaxConnectionIDLength {
		return herr.New(herr.InvalidArgument, "a connection id must be 1 to %d bytes long", MaxConnectionIDLength)
	}
	if len(data) > MaxConnectionData {
		return herr.New(herr.InvalidArgument, "connection data is %d bytes; the limit is %d", len(data), MaxConnectionData)
	}
	return nil
}

func errConnectionNotFound(id string) error {
	return herr.New(herr.NotFound, "connection %q does not exist", id)
}

// CreateConnection stores a new connection record id holding data, with
// CreatedAt and UpdatedAt set to now (Options.Now), and returns it ready
// for UpdateConnection.
//
// Errors: herr.InvalidArgument for an id that is empty or longer than
// MaxConnectionIDLength bytes, or data over MaxConnectionData bytes;
// herr.AlreadyExists when a record with this id exists; the store's errors
// (herr.Unavailable, …).
func (s *Store) CreateConnection(ctx context.Context, id string, data []byte) (*Connection, error) {
	if err := checkConnection(id, data); err != nil {
		return nil, err
	}
	now := s.nowMs()
	d := &connectionDoc{
		Key: connectionKey(id), Kind: kindConnection, ID: id, Data: data,
		CreatedAt: now, UpdatedAt: now,
	}
	if err := s.coll.Create(ctx, d); err != nil {
		if gcerrors.Code(err) == gcerrors.AlreadyExists {
			return nil, herr.New(herr.AlreadyExists, "connection %q already exists", id)
		}
		return nil, storeErr(err)
	}
	return d.view(), nil
}

// GetConnection returns connection record id, ready for UpdateConnection.
//
// Errors: herr.InvalidArgument for an id that is empty or too long;
// herr.NotFound when there is no such record; the store's errors.
func (s *Store) GetConnection(ctx context.Context, id string) (*Connection, error) {
	if err := checkConnection(id, nil); err != nil {
		return nil, err
	}
	d := &connectionDoc{Key: connectionKey(id)}
	if err := s.coll.Get(ctx, d); err != nil {
		if gcerrors.Code(err) == gcerrors.NotFound {
			return nil, errConnectionNotFound(id)
		}
		return nil, storeErr(err)
	}
	return d.view(), nil
}

// UpdateConnection writes c.Data if the record has not been written since
// c was read (by GetConnection, CreateConnection or a previous
// UpdateConnection): one revision-conditional write. On success it
// refreshes c's revision and sets c.UpdatedAt to now; c.CreatedAt is kept
// as read. Only Data changes: c.ID names the record.
//
// Errors: herr.Aborted when another write came first (the caller re-reads
// the record, re-applies its change and tries again); herr.NotFound when
// the record was deleted; herr.InvalidArgument for a c that was not read
// from the store, a bad id, or Data over MaxConnectionData bytes; the
// store's errors.
func (s *Store) UpdateConnection(ctx context.Context, c *Connection) error {
	if c == nil || c.revision == nil {
		return herr.New(herr.InvalidArgument, "update a connection read by GetConnection, CreateConnection or UpdateConnection")
	}
	if err := checkConnection(c.ID, c.Data); err != nil {
		return err
	}
	now := s.nowMs()
	d := &connectionDoc{
		Key: connectionKey(c.ID), Kind: kindConnection, ID: c.ID, Data: c.Data,
		CreatedAt: c.CreatedAt.UnixMilli(), UpdatedAt: now,
		DocstoreRevision: c.revision,
	}
	err := s.coll.Replace(ctx, d)
	switch gcerrors.Code(err) {
	case gcerrors.OK:
		c.revision = d.DocstoreRevision
		c.UpdatedAt = time.UnixMilli(now).UTC()
		return nil
	case gcerrors.NotFound:
		return errConnectionNotFound(c.ID)
	case gcerrors.FailedPrecondition:
		// The revision did not match: another write, or a delete (some
		// backends cannot tell the two apart in one call).
		if _, gerr := s.GetConnection(ctx, c.ID); herr.CodeOf(gerr) == herr.NotFound {
			return gerr
		}
		return herr.New(herr.Aborted, "connection %q was written by someone else since it was read: read it again and retry", c.ID)
	default:
		return storeErr(err)
	}
}

// DeleteConnection deletes connection record id. It is idempotent:
// deleting a record that does not exist is not an error.
//
// Errors: herr.InvalidArgument for a bad id; the store's errors.
func (s *Store) DeleteConnection(ctx context.Context, id string) error {
	if err := checkConnection(id, nil); err != nil {
		return err
	}
	if err := s.coll.Delete(ctx, &connectionDoc{Key: connectionKey(id)}); err != nil && gcerrors.Code(err) != gcerrors.NotFound {
		return storeErr(err)
	}
	return nil
}

// DeleteConnectionIfUnchanged deletes connection record c.ID if it has
// not been written since c was read (by GetConnection, CreateConnection or
// UpdateConnection): one revision-conditional delete, so that a change
// another writer made after c was read (say a session it attached) is not
// lost with the record. A record that no longer exists is not an error.
//
// Errors: herr.Aborted when the record was written since c was read (the
// caller re-reads it, deals with what it holds now, and tries again);
// herr.InvalidArgument for a c that was not read from the store or a bad
// id; the store's errors.
func (s *Store) DeleteConnectionIfUnchanged(ctx context.Context, c *Connection) error {
	if c == nil || c.revision == nil {
		return herr.New(herr.InvalidArgument, "delete a connection read by GetConnection, CreateConnection or UpdateConnection")
	}
	if err := checkConnection(c.ID, nil); err != nil {
		return err
	}
	err := s.coll.Delete(ctx, &connectionDoc{Key: connectionKey(c.ID), DocstoreRevision: c.revision})
	switch gcerrors.Code(err) {
	case gcerrors.OK, gcerrors.NotFound:
		return nil
	case gcerrors.FailedPrecondition:
		// Written since, or deleted (some backends cannot tell the two
		// apart in one call).
		if _, gerr := s.GetConnection(ctx, c.ID); herr.CodeOf(gerr) == herr.NotFound {
			return nil
		}
		return herr.New(herr.Aborted, "connection %q was written by someone else since it was read: read it again and retry", c.ID)
	default:
		return storeErr(err)
	}
}

// ReapConnections deletes the connection records not written for longer
// than maxAge (UpdatedAt + maxAge before now, by Options.Now) and returns
// them, Data included, so that the caller detaches the sessions they held.
// API Gateway closes every connection after 2 hours and its $disconnect
// event is best effort, so records of dead connections are left behind;
// a bridge calls this on a schedule. Only writes refresh UpdatedAt (reads
// do not), so the bridge writes a live connection's record more often than
// maxAge even when its Data did not change (UpdateConnection with Data as
// read), and picks a maxAge above the longest a live client may stay
// silent (API Gateway's idle timeout is 10 minutes).
//
// Each delete is conditional on the record as read, so a connection
// written meanwhile stays (and is not returned). Cost: one query of every
// connection record's key and UpdatedAt (records of kind "wsconnection";
// a scan on DynamoDB), then one read and one delete per stale record.
// Other record kinds are never read or touched. When some records cannot
// be read or deleted it goes on with the others and returns what it
// deleted with the errors joined.
//
// Errors: herr.InvalidArgument for maxAge under a millisecond; the
// store's errors.
func (s *Store) ReapConnections(ctx context.Context, maxAge time.Duration) ([]*Connection, error) {
	if maxAge < time.Millisecond {
		return nil, herr.New(herr.InvalidArgument, "maxAge must be at least a millisecond")
	}
	cutoff := s.nowMs() - maxAge.Milliseconds()
	stale := func(d *connectionDoc) bool { return d.UpdatedAt < cutoff }
	var keys []string
	err := eachOfKind(ctx, s, kindConnection, func(d *connectionDoc) error {
		if stale(d) {
			keys = append(keys, d.Key)
		}
		return nil
	}, "key", "updated_ms")
	if err != nil {
		return nil, err
	}
	var (
		out  []*Connection
		errs []error
	)
	for _, key := range keys {
		d := &connectionDoc{Key: key}
		if err := s.coll.Get(ctx, d); err != nil {
			if gcerrors.Code(err) != gcerrors.NotFound {
				errs = append(errs, storeErr(err))
			}
			continue
		}
		if !stale(d) {
			continue // written since the query
		}
		switch err := s.coll.Delete(ctx, d); gcerrors.Code(err) {
		case gcerrors.OK:
			out = append(out, d.view())
		case gcerrors.NotFound, gcerrors.FailedPrecondition:
			// Deleted or written since it was read: not ours to reap.
		default:
			errs = append(errs, storeErr(err))
		}
	}
	return out, errors.Join(errs...)
}
