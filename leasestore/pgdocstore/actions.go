package pgdocstore

import (
	"context"
	"errors"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"gocloud.dev/docstore/driver"
	"gocloud.dev/gcerrors"
)

// maxConcurrentActions bounds how many actions of one list run at once,
// each on its own pooled connection.
const maxConcurrentActions = 4

// querier is what an action runs on: the pool, or a transaction.
type querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// RunActions implements driver.Collection.RunActions. Gets and writes run
// in docstore's groups (gets that must precede writes, other gets, writes,
// atomic writes, gets that follow writes). A group of gets is one pipeline
// of statements on one connection: one round trip. The atomic writes are
// one pipeline too, run by PostgreSQL as one implicit transaction, so
// either all of them happen or none does, and a failure is reported for
// each of them; a group holding an Update, which must read before it
// writes, runs as a transaction of one statement after another instead.
// Other writes run one statement each (an Update as one short
// transaction), up to four at a time.
func (c *collection) RunActions(ctx context.Context, actions []*driver.Action, opts *driver.RunActionsOptions) driver.ActionListError {
	errs := make([]error, len(actions))
	if opts.BeforeDo != nil {
		if err := opts.BeforeDo(func(any) bool { return false }); err != nil {
			for i := range errs {
				errs[i] = err
			}
			return driver.NewActionListError(errs)
		}
	}
	beforeGets, gets, writes, writesTx, afterGets := driver.GroupActions(actions)
	c.runGets(ctx, beforeGets, errs)
	c.runGets(ctx, gets, errs)
	c.runEach(ctx, writes, errs)
	if len(writesTx) > 0 {
		if slices.ContainsFunc(writesTx, func(a *driver.Action) bool { return a.Kind == driver.Update }) {
			c.runAtomic(ctx, writesTx, errs)
		} else {
			c.runPipelined(ctx, writesTx, errs)
		}
	}
	c.runGets(ctx, afterGets, errs)
	return driver.NewActionListError(errs)
}

// runGets reads the documents of get actions in one pipeline, bounded by
// the statement timeout, recording each one's error at its index.
func (c *collection) runGets(ctx context.Context, actions []*driver.Action, errs []error) {
	switch len(actions) {
	case 0:
		return
	case 1:
		c.runEach(ctx, actions, errs)
		return
	}
	actx, cancel := c.bound(ctx)
	defer cancel()
	b := &pgx.Batch{}
	for _, a := range actions {
		b.Queue(c.sql.get, a.Key)
	}
	br := c.pool.SendBatch(actx, b)
	for _, a := range actions {
		var (
			rev *int64
			raw []byte
		)
		err := br.QueryRow().Scan(&rev, &raw)
		switch {
		case errors.Is(err, pgx.ErrNoRows):
			err = errorf(gcerrors.NotFound, nil, "pgdocstore: document %q not found", a.Key)
		case err == nil:
			err = c.decodeInto(raw, rev, a.Doc, a.FieldPaths)
		}
		errs[a.Index] = err
	}
	if err := br.Close(); err != nil {
		for _, a := range actions {
			if errs[a.Index] == nil {
				errs[a.Index] = err
			}
		}
	}
}

// runEach runs actions concurrently, each bounded by the statement
// timeout, recording each one's error at its index.
func (c *collection) runEach(ctx context.Context, actions []*driver.Action, errs []error) {
	t := driver.NewThrottle(maxConcurrentActions)
	for _, a := range actions {
		t.Acquire()
		go func() {
			defer t.Release()
			actx, cancel := c.bound(ctx)
			defer cancel()
			if a.Kind == driver.Update {
				errs[a.Index] = pgx.BeginFunc(actx, c.pool, func(tx pgx.Tx) error {
					return c.runAction(actx, tx, a, nil)
				})
				return
			}
			errs[a.Index] = c.runAction(actx, c.pool, a, nil)
		}()
	}
	t.Wait()
}

// runAtomic runs write actions in one transaction, one statement after
// another.
func (c *collection) runAtomic(ctx context.Context, actions []*driver.Action, errs []error) {
	actx, cancel := c.bound(ctx)
	defer cancel()
	var after []func() error
	err := pgx.BeginFunc(actx, c.pool, func(tx pgx.Tx) error {
		for _, a := range actions {
			if err := c.runAction(actx, tx, a, &after); err != nil {
				return err
			}
		}
		return nil
	})
	c.settleAtomic(actions, after, err, errs)
}

// settleAtomic records the outcome of an atomic group: on success, the new
// revisions in the documents (only now that the writes are committed);
// on failure, err for each action.
func (c *collection) settleAtomic(actions []*driver.Action, after []func() error, err error, errs []error) {
	if err == nil {
		for _, f := range after {
			if e := f(); e != nil && err == nil {
				err = e
			}
		}
	}
	if err != nil {
		for _, a := range actions {
			errs[a.Index] = err
		}
	}
}

// pipelined is one planned write of an atomic pipeline: its statement and
// arguments, and how its result row is read.
type pipelined struct {
	a    *driver.Action
	sql  string
	args []any
	rev  any  // the revision the write is conditioned on, or nil
	scan bool // the statement returns the new revision
}

// runPipelined runs Create, Replace, Put and Delete actions as one
// pipeline: PostgreSQL runs the statements between two Syncs as one
// implicit transaction, so the group costs one round trip and commits all
// or nothing. A conditional write that finds no row fails its statement
// (the atomic forms in buildStatements divide by the count of rows
// written), which aborts the transaction; only then is the document read
// again, to tell NotFound from FailedPrecondition.
func (c *collection) runPipelined(ctx context.Context, actions []*driver.Action, errs []error) {
	actx, cancel := c.bound(ctx)
	defer cancel()
	plan := make([]pipelined, 0, len(actions))
	for _, a := range actions {
		p, err := c.planWrite(a)
		if err != nil {
			c.settleAtomic(actions, nil, err, errs)
			return
		}
		plan = append(plan, p)
	}
	b := &pgx.Batch{}
	for _, p := range plan {
		b.Queue(p.sql, p.args...)
	}
	br := c.pool.SendBatch(actx, b)
	var (
		after []func() error
		err   error
	)
	for _, p := range plan {
		var newRev *int64
		if p.scan {
			err = br.QueryRow().Scan(&newRev)
		} else {
			_, err = br.Exec()
		}
		if err != nil {
			err = c.pipelineErr(actx, p, err)
			break
		}
		if err = c.setRevision(p.a.Doc, newRev, &after); err != nil {
			break
		}
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	c.settleAtomic(actions, after, err, errs)
}

// planWrite is the statement of one write of an atomic pipeline. A Create
// without a key is given one here, as write does.
func (c *collection) planWrite(a *driver.Action) (pipelined, error) {
	rev, err := c.docRevision(a.Doc)
	if err != nil {
		return pipelined{}, err
	}
	p := pipelined{a: a, rev: rev}
	if a.Kind == driver.Delete {
		if rev == nil {
			p.sql, p.args = c.sql.del, []any{a.Key}
		} else {
			p.sql, p.args = c.sql.delRevAtomic, []any{a.Key, rev}
		}
		return p, nil
	}
	if a.Kind == driver.Create && a.Key == nil {
		if c.opts.KeyFunc != nil {
			return p, errorf(gcerrors.InvalidArgument, nil, "pgdocstore: missing document key")
		}
		key := driver.UniqueString()
		if err := a.Doc.SetField(c.opts.KeyField, key); err != nil {
			return p, errorf(gcerrors.InvalidArgument, err, "pgdocstore: cannot set key field %q", c.opts.KeyField)
		}
		a.Key = key
	}
	raw, err := c.encodeForWrite(a.Doc)
	if err != nil {
		return p, err
	}
	withRev := a.Doc.HasField(c.opts.RevisionField)
	p.scan = true
	switch {
	case a.Kind == driver.Create:
		p.sql, p.args = c.sql.createAtomic, []any{a.Key, raw, withRev}
	case a.Kind == driver.Put && rev == nil:
		p.sql, p.args = c.sql.upsert, []any{a.Key, raw, withRev}
	case rev == nil: // Replace
		p.sql, p.args = c.sql.replaceAtomic, []any{a.Key, raw, withRev}
	default: // Replace, or Put conditioned on a revision
		p.sql, p.args = c.sql.replaceRevAtomic, []any{a.Key, raw, withRev, rev}
	}
	return p, nil
}

// pipelineErr is the error of a failed statement of an atomic pipeline,
// in docstore's codes: a duplicate key is AlreadyExists; a conditional
// write that found no row is NotFound when the document is gone (read
// again, after the rollback) and FailedPrecondition when its revision
// moved on.
func (c *collection) pipelineErr(ctx context.Context, p pipelined, err error) error {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) {
		return err
	}
	switch pgErr.Code {
	case "23505": // unique_violation
		return errorf(gcerrors.AlreadyExists, nil, "pgdocstore: document %q exists", p.a.Key)
	case "22012": // division_by_zero: no row written
		exists := false
		if p.rev != nil {
			var one int
			switch rerr := c.pool.QueryRow(ctx, c.sql.exists, p.a.Key).Scan(&one); {
			case rerr == nil:
				exists = true
			case !errors.Is(rerr, pgx.ErrNoRows):
				return rerr
			}
		}
		return notWritten(p.a.Key, p.rev, exists)
	}
	return err
}

// runAction runs one action on q. A write's new revision is set in its
// document at once, or, when after is non-nil, by a function appended to
// it.
func (c *collection) runAction(ctx context.Context, q querier, a *driver.Action, after *[]func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	switch a.Kind {
	case driver.Get:
		return c.get(ctx, q, a)
	case driver.Delete:
		return c.delete(ctx, q, a)
	case driver.Update:
		return c.update(ctx, q, a, after)
	case driver.Create, driver.Replace, driver.Put:
		return c.write(ctx, q, a, after)
	}
	return errorf(gcerrors.Internal, nil, "pgdocstore: unknown action kind %v", a.Kind)
}

func (c *collection) get(ctx context.Context, q querier, a *driver.Action) error {
	var (
		rev *int64
		raw []byte
	)
	err := q.QueryRow(ctx, c.sql.get, a.Key).Scan(&rev, &raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return errorf(gcerrors.NotFound, nil, "pgdocstore: document %q not found", a.Key)
	}
	if err != nil {
		return err
	}
	return c.decodeInto(raw, rev, a.Doc, a.FieldPaths)
}

// decodeInto decodes a stored document and its revision into doc, keeping
// only fps when given.
func (c *collection) decodeInto(raw []byte, rev *int64, doc driver.Document, fps [][]string) error {
	v, err := unmarshal(raw)
	if err != nil {
		return err
	}
	tree, ok := v.(map[string]any)
	if !ok {
		return errorf(gcerrors.Internal, nil, "pgdocstore: stored document is a %T, not an object", v)
	}
	if rev != nil {
		tree[c.opts.RevisionField] = *rev
	}
	return doc.Decode(decoder{project(tree, fps)})
}

// docRevision returns the revision a write is conditioned on: nil when the
// document has none.
func (c *collection) docRevision(doc driver.Document) (any, error) {
	rev, _ := doc.GetField(c.opts.RevisionField)
	if rev == nil {
		return nil, nil
	}
	if _, ok := rev.(int64); !ok {
		return nil, errorf(gcerrors.InvalidArgument, nil, "pgdocstore: revision %v is a %T, not an int64 this collection wrote", rev, rev)
	}
	return rev, nil
}

// encodeForWrite encodes a document for storage, without its revision
// field, refusing one over MaxDocumentBytes.
func (c *collection) encodeForWrite(doc driver.Document) ([]byte, error) {
	tree, err := encodeDoc(doc)
	if err != nil {
		return nil, err
	}
	delete(tree, c.opts.RevisionField)
	return c.marshalBounded(tree)
}

func (c *collection) marshalBounded(tree map[string]any) ([]byte, error) {
	raw, err := marshal(tree)
	if err != nil {
		return nil, err
	}
	if len(raw) > c.opts.MaxDocumentBytes {
		return nil, errorf(gcerrors.InvalidArgument, nil, "pgdocstore: document of %d bytes is over the limit of %d", len(raw), c.opts.MaxDocumentBytes)
	}
	return raw, nil
}

// setRevision records a write's new revision in its document, now or
// after the transaction commits.
func (c *collection) setRevision(doc driver.Document, rev *int64, after *[]func() error) error {
	if rev == nil || !doc.HasField(c.opts.RevisionField) {
		return nil
	}
	set := func() error { return doc.SetField(c.opts.RevisionField, *rev) }
	if after != nil {
		*after = append(*after, set)
		return nil
	}
	return set()
}

func (c *collection) write(ctx context.Context, q querier, a *driver.Action, after *[]func() error) error {
	rev, err := c.docRevision(a.Doc)
	if err != nil {
		return err
	}
	key := a.Key
	if a.Kind == driver.Create && key == nil {
		if c.opts.KeyFunc != nil {
			return errorf(gcerrors.InvalidArgument, nil, "pgdocstore: missing document key")
		}
		key = driver.UniqueString()
		if err := a.Doc.SetField(c.opts.KeyField, key); err != nil {
			return errorf(gcerrors.InvalidArgument, err, "pgdocstore: cannot set key field %q", c.opts.KeyField)
		}
		a.Key = key
	}
	raw, err := c.encodeForWrite(a.Doc)
	if err != nil {
		return err
	}
	// A document with a revision field is given a new revision; so is
	// every document once it has one, so a write never keeps a revision
	// another writer may still hold (see buildStatements).
	withRev := a.Doc.HasField(c.opts.RevisionField)
	var newRev *int64
	switch {
	case a.Kind == driver.Create:
		err = q.QueryRow(ctx, c.sql.create, key, raw, withRev).Scan(&newRev)
		if errors.Is(err, pgx.ErrNoRows) {
			return errorf(gcerrors.AlreadyExists, nil, "pgdocstore: document %q exists", key)
		}
	case a.Kind == driver.Put && rev == nil:
		err = q.QueryRow(ctx, c.sql.upsert, key, raw, withRev).Scan(&newRev)
	default: // Replace, or Put conditioned on a revision
		var updated, exists bool
		if rev == nil {
			err = q.QueryRow(ctx, c.sql.replace, key, raw, withRev).Scan(&updated, &newRev, &exists)
		} else {
			err = q.QueryRow(ctx, c.sql.replaceRev, key, raw, withRev, rev).Scan(&updated, &newRev, &exists)
		}
		if err == nil && !updated {
			return notWritten(key, rev, exists)
		}
	}
	if err != nil {
		return err
	}
	return c.setRevision(a.Doc, newRev, after)
}

// notWritten is the error of a conditional write that changed nothing.
func notWritten(key, rev any, exists bool) error {
	if exists && rev != nil {
		return errorf(gcerrors.FailedPrecondition, nil, "pgdocstore: document %q has changed since revision %v", key, rev)
	}
	return errorf(gcerrors.NotFound, nil, "pgdocstore: document %q not found", key)
}

func (c *collection) delete(ctx context.Context, q querier, a *driver.Action) error {
	rev, err := c.docRevision(a.Doc)
	if err != nil {
		return err
	}
	if rev == nil {
		_, err := q.Exec(ctx, c.sql.del, a.Key)
		return err
	}
	var deleted, exists bool
	if err := q.QueryRow(ctx, c.sql.delRev, a.Key, rev).Scan(&deleted, &exists); err != nil {
		return err
	}
	if !deleted {
		return notWritten(a.Key, rev, exists)
	}
	return nil
}

// update applies a docstore Update inside the transaction q: read the row
// FOR UPDATE, check the revision, apply the mods, write it back.
func (c *collection) update(ctx context.Context, q querier, a *driver.Action, after *[]func() error) error {
	rev, err := c.docRevision(a.Doc)
	if err != nil {
		return err
	}
	var (
		curRev *int64
		raw    []byte
	)
	err = q.QueryRow(ctx, c.sql.lock, a.Key).Scan(&curRev, &raw)
	if errors.Is(err, pgx.ErrNoRows) {
		return errorf(gcerrors.NotFound, nil, "pgdocstore: document %q not found", a.Key)
	}
	if err != nil {
		return err
	}
	if rev != nil && (curRev == nil || *curRev != rev.(int64)) {
		return errorf(gcerrors.FailedPrecondition, nil, "pgdocstore: document %q has changed since revision %v", a.Key, rev)
	}
	v, err := unmarshal(raw)
	if err != nil {
		return err
	}
	tree, ok := v.(map[string]any)
	if !ok {
		return errorf(gcerrors.Internal, nil, "pgdocstore: stored document is a %T, not an object", v)
	}
	if err := applyMods(tree, a.Mods); err != nil {
		return err
	}
	if raw, err = c.marshalBounded(tree); err != nil {
		return err
	}
	withRev := a.Doc.HasField(c.opts.RevisionField) || curRev != nil
	var newRev *int64
	if err := q.QueryRow(ctx, c.sql.update, a.Key, raw, withRev).Scan(&newRev); err != nil {
		return err
	}
	return c.setRevision(a.Doc, newRev, after)
}
