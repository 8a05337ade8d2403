package pgdocstore

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"reflect"
	"regexp"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"gocloud.dev/docstore"
	"gocloud.dev/docstore/driver"
	"gocloud.dev/gcerrors"
)

// DefaultStatementTimeout bounds one statement (or one transaction) when
// Options.StatementTimeout is zero.
const DefaultStatementTimeout = 10 * time.Second

// DefaultMaxDocumentBytes is the largest stored document (its JSON text)
// when Options.MaxDocumentBytes is zero: 4 MiB.
const DefaultMaxDocumentBytes = 4 << 20

// tableNameRE is what a table name may be: an unquoted PostgreSQL
// identifier, at most 63 bytes (NAMEDATALEN-1), leaving room for the
// sequence's and indexes' suffixes.
var tableNameRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,47}$`)

// indexFieldRE is what an indexed field name may be.
var indexFieldRE = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,15}$`)

// Options configure a collection. The zero value is a collection keyed by
// "key" with docstore's default revision field.
type Options struct {
	// KeyField names the document field that is the key; it must hold a
	// string. Ignored when KeyFunc is set. Default "key".
	KeyField string
	// KeyFunc, if set, computes a document's key (a string) instead of
	// KeyField; such a collection cannot make keys for Create.
	KeyFunc func(docstore.Document) any
	// RevisionField names the revision field; default
	// docstore.DefaultRevisionField.
	RevisionField string
	// IndexFields are top-level fields given an expression index on
	// (doc -> 'FIELD') when the table is created, so that an "=" filter on
	// them does not read every document. Names match
	// [A-Za-z_][A-Za-z0-9_]{0,15}.
	IndexFields []string
	// StatementTimeout bounds each statement or transaction the
	// collection runs, on top of the caller's context. Default
	// DefaultStatementTimeout.
	StatementTimeout time.Duration
	// MaxDocumentBytes refuses (InvalidArgument) a write whose stored JSON
	// is larger. Default DefaultMaxDocumentBytes.
	MaxDocumentBytes int
	// ClosePool makes Close close the pool too, for a pool opened only for
	// this collection.
	ClosePool bool
}

// collection is the driver.Collection over one table.
type collection struct {
	pool  *pgxpool.Pool
	opts  Options
	table string // quoted
	seq   string // quoted, for nextval's regclass argument
	sql   statements
}

// statements are the collection's SQL texts, built once.
type statements struct {
	get, create, upsert, replace, replaceRev, del, delRev, lock, update string
	// The forms run in an atomic pipeline (runPipelined) fail when they
	// write nothing, so that the implicit transaction rolls back: a
	// duplicate key fails the INSERT (unique_violation); a conditional
	// UPDATE or DELETE that matches no row divides by zero
	// (division_by_zero), which none of these statements can otherwise
	// raise. exists reads whether a key is present.
	createAtomic, replaceAtomic, replaceRevAtomic, delRevAtomic, exists string
}

// OpenCollection opens the collection stored in table (created with its
// sequence and indexes if absent) on pool. table matches
// [A-Za-z_][A-Za-z0-9_]{0,47} and is used unquoted-case as given.
//
// Errors (their codes by ErrorCode): InvalidArgument for a bad table or
// option; FailedPrecondition when table exists with other columns;
// PermissionDenied when the role may not create or read it; Unknown when
// the server cannot be reached.
func OpenCollection(ctx context.Context, pool *pgxpool.Pool, table string, opts *Options) (*docstore.Collection, error) {
	c, err := newCollection(ctx, pool, table, opts)
	if err != nil {
		return nil, err
	}
	return docstore.NewCollection(c), nil
}

func newCollection(ctx context.Context, pool *pgxpool.Pool, table string, opts *Options) (*collection, error) {
	if pool == nil {
		return nil, errorf(gcerrors.InvalidArgument, nil, "pgdocstore: nil pool")
	}
	if !tableNameRE.MatchString(table) {
		return nil, errorf(gcerrors.InvalidArgument, nil, "pgdocstore: table name %q must match %s", table, tableNameRE)
	}
	o := Options{}
	if opts != nil {
		o = *opts
	}
	if o.KeyField == "" {
		o.KeyField = "key"
	}
	if o.RevisionField == "" {
		o.RevisionField = docstore.DefaultRevisionField
	}
	if o.StatementTimeout <= 0 {
		o.StatementTimeout = DefaultStatementTimeout
	}
	if o.MaxDocumentBytes <= 0 {
		o.MaxDocumentBytes = DefaultMaxDocumentBytes
	}
	for _, f := range o.IndexFields {
		if !indexFieldRE.MatchString(f) {
			return nil, errorf(gcerrors.InvalidArgument, nil, "pgdocstore: index field %q must match %s", f, indexFieldRE)
		}
	}
	c := &collection{
		pool:  pool,
		opts:  o,
		table: pgx.Identifier{table}.Sanitize(),
		seq:   pgx.Identifier{table + "_revision"}.Sanitize(),
	}
	c.sql = buildStatements(c.table, c.seq)
	if err := c.ensureTable(ctx, table); err != nil {
		return nil, err
	}
	return c, nil
}

// buildStatements writes the statements of one table. $1 is always the
// key. A revision is drawn from the table's sequence, so a revision is
// never reused, even by a document deleted and created again; a document
// written without a revision field stores NULL and is never given one.
func buildStatements(table, seq string) statements {
	// $3 says whether the written document has a revision field. A row
	// that has a revision always gets a new one, so that no write keeps a
	// revision another client may still hold.
	fresh := fmt.Sprintf("CASE WHEN $3::bool THEN nextval('%s') END", seq)
	again := fmt.Sprintf("CASE WHEN $3::bool OR revision IS NOT NULL THEN nextval('%s') END", seq)
	upsertAgain := fmt.Sprintf("COALESCE(EXCLUDED.revision, CASE WHEN %s.revision IS NOT NULL THEN nextval('%s') END)", table, seq)
	return statements{
		get:    "SELECT revision, doc FROM " + table + " WHERE key = $1",
		create: "INSERT INTO " + table + " (key, revision, doc) VALUES ($1, " + fresh + ", $2) ON CONFLICT (key) DO NOTHING RETURNING revision",
		upsert: "INSERT INTO " + table + " (key, revision, doc) VALUES ($1, " + fresh + ", $2) " +
			"ON CONFLICT (key) DO UPDATE SET revision = " + upsertAgain + ", doc = EXCLUDED.doc RETURNING revision",
		// The outer EXISTS reads the snapshot the statement started
		// from, so a failed update can tell "absent" from "changed".
		replace: "WITH w AS (UPDATE " + table + " SET revision = " + again + ", doc = $2 WHERE key = $1 RETURNING revision) " +
			"SELECT EXISTS (SELECT 1 FROM w), (SELECT revision FROM w), EXISTS (SELECT 1 FROM " + table + " WHERE key = $1)",
		replaceRev: "WITH w AS (UPDATE " + table + " SET revision = " + again + ", doc = $2 WHERE key = $1 AND revision = $4 RETURNING revision) " +
			"SELECT EXISTS (SELECT 1 FROM w), (SELECT revision FROM w), EXISTS (SELECT 1 FROM " + table + " WHERE key = $1)",
		del: "DELETE FROM " + table + " WHERE key = $1",
		delRev: "WITH d AS (DELETE FROM " + table + " WHERE key = $1 AND revision = $2 RETURNING 1) " +
			"SELECT EXISTS (SELECT 1 FROM d), EXISTS (SELECT 1 FROM " + table + " WHERE key = $1)",
		lock:   "SELECT revision, doc FROM " + table + " WHERE key = $1 FOR UPDATE",
		update: "UPDATE " + table + " SET revision = " + again + ", doc = $2 WHERE key = $1 RETURNING revision",

		createAtomic: "INSERT INTO " + table + " (key, revision, doc) VALUES ($1, " + fresh + ", $2) RETURNING revision",
		replaceAtomic: "WITH w AS (UPDATE " + table + " SET revision = " + again + ", doc = $2 WHERE key = $1 RETURNING revision) " +
			"SELECT (SELECT revision FROM w) WHERE 1 / (SELECT count(*) FROM w) = 1",
		replaceRevAtomic: "WITH w AS (UPDATE " + table + " SET revision = " + again + ", doc = $2 WHERE key = $1 AND revision = $4 RETURNING revision) " +
			"SELECT (SELECT revision FROM w) WHERE 1 / (SELECT count(*) FROM w) = 1",
		delRevAtomic: "WITH d AS (DELETE FROM " + table + " WHERE key = $1 AND revision = $2 RETURNING 1) " +
			"SELECT 1 / (SELECT count(*) FROM d)",
		exists: "SELECT 1 FROM " + table + " WHERE key = $1",
	}
}

// ensureTable creates the table, its sequence and indexes if absent,
// under an advisory lock (concurrent CREATE ... IF NOT EXISTS of one name
// can fail on the catalog's unique index), then checks its columns.
func (c *collection) ensureTable(ctx context.Context, table string) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.StatementTimeout)
	defer cancel()
	h := fnv.New64a()
	_, _ = h.Write([]byte("herald pgdocstore " + table))
	lockKey := int64(h.Sum64())
	err := pgx.BeginFunc(ctx, c.pool, func(tx pgx.Tx) error {
		stmts := []string{
			"SELECT pg_advisory_xact_lock(" + strconv.FormatInt(lockKey, 10) + ")",
			"CREATE SEQUENCE IF NOT EXISTS " + c.seq,
			"CREATE TABLE IF NOT EXISTS " + c.table + ` (key text COLLATE "C" PRIMARY KEY, revision bigint, doc jsonb NOT NULL)`,
		}
		for _, f := range c.opts.IndexFields {
			idx := pgx.Identifier{table + "_" + f + "_idx"}.Sanitize()
			stmts = append(stmts, "CREATE INDEX IF NOT EXISTS "+idx+" ON "+c.table+" ((doc -> '"+f+"'))")
		}
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return errorf(tableCode(err), err, "pgdocstore: create table %s", table)
	}
	rows, err := c.pool.Query(ctx, "SELECT key, revision, doc FROM "+c.table+" LIMIT 0")
	if err == nil {
		rows.Close()
		err = rows.Err()
	}
	if err != nil {
		return errorf(tableCode(err), err, "pgdocstore: table %s must have columns key text, revision bigint, doc jsonb", table)
	}
	return nil
}

// tableCode is the code of an error making or checking the table: a
// missing column means a table of the name exists with other columns.
func tableCode(err error) gcerrors.ErrorCode {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "42703" { // undefined_column
		return gcerrors.FailedPrecondition
	}
	return codeOf(err)
}

// bound returns ctx limited by the statement timeout.
func (c *collection) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.opts.StatementTimeout)
}

// Key implements driver.Collection.Key: the key is a non-empty string.
func (c *collection) Key(doc driver.Document) (any, error) {
	var key any
	if c.opts.KeyFunc != nil {
		key = c.opts.KeyFunc(doc.Origin)
		if key == nil || driver.IsEmptyValue(reflect.ValueOf(key)) {
			return nil, errorf(gcerrors.InvalidArgument, nil, "pgdocstore: missing document key")
		}
	} else {
		key, _ = doc.GetField(c.opts.KeyField)
		if key == nil || driver.IsEmptyValue(reflect.ValueOf(key)) {
			return nil, nil // Create makes one
		}
	}
	s, ok := key.(string)
	if !ok {
		return nil, errorf(gcerrors.InvalidArgument, nil, "pgdocstore: document key %v is a %T, not a string", key, key)
	}
	if !storable(s) {
		return nil, errorf(gcerrors.InvalidArgument, nil, "pgdocstore: document key %q holds a NUL or invalid UTF-8", s)
	}
	return s, nil
}

// RevisionField implements driver.Collection.RevisionField.
func (c *collection) RevisionField() string { return c.opts.RevisionField }

// RevisionToBytes implements driver.Collection.RevisionToBytes.
func (c *collection) RevisionToBytes(rev any) ([]byte, error) {
	r, ok := rev.(int64)
	if !ok {
		return nil, errorf(gcerrors.InvalidArgument, nil, "pgdocstore: revision %v is a %T, not an int64", rev, rev)
	}
	return strconv.AppendInt(nil, r, 10), nil
}

// BytesToRevision implements driver.Collection.BytesToRevision.
func (c *collection) BytesToRevision(b []byte) (any, error) {
	r, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		return nil, errorf(gcerrors.InvalidArgument, err, "pgdocstore: revision %q", b)
	}
	return r, nil
}

// As implements driver.Collection.As: *pgxpool.Pool.
func (c *collection) As(i any) bool {
	p, ok := i.(**pgxpool.Pool)
	if ok {
		*p = c.pool
	}
	return ok
}

// ErrorAs implements driver.Collection.ErrorAs: *pgconn.PgError.
func (c *collection) ErrorAs(err error, i any) bool {
	p, ok := i.(**pgconn.PgError)
	return ok && errors.As(err, p)
}

// ErrorCode implements driver.Collection.ErrorCode.
func (c *collection) ErrorCode(err error) gcerrors.ErrorCode { return codeOf(err) }

// Close implements driver.Collection.Close.
func (c *collection) Close() error {
	if c.opts.ClosePool {
		c.pool.Close()
	}
	return nil
}

// ErrorCode returns the docstore code of an error OpenCollection returned
// (a collection's own errors carry theirs: use gcerrors.Code on them).
func ErrorCode(err error) gcerrors.ErrorCode { return codeOf(err) }

// codeOf maps an error to docstore's vocabulary: the driver's own coded
// errors keep their code; contexts map to Canceled and DeadlineExceeded;
// PostgreSQL's SQLSTATE classes map as below; a connection that cannot be
// made or broke is Unknown, which callers treat as retryable.
func codeOf(err error) gcerrors.ErrorCode {
	if err == nil {
		return gcerrors.OK
	}
	if code, ok := ownCode(err); ok {
		return code
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return gcerrors.DeadlineExceeded
	}
	if errors.Is(err, context.Canceled) {
		return gcerrors.Canceled
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		case pgErr.Code == "23505": // unique_violation
			return gcerrors.AlreadyExists
		case pgErr.Code == "57014": // query_canceled (statement_timeout)
			return gcerrors.DeadlineExceeded
		case pgErr.Code == "40001", pgErr.Code == "40P01": // serialization failure, deadlock
			return gcerrors.FailedPrecondition
		case pgErr.Code == "53100", pgErr.Code == "53200", pgErr.Code == "53300", pgErr.Code == "54000":
			return gcerrors.ResourceExhausted // disk full, out of memory, too many connections, limits
		case pgErr.Code[:2] == "22": // data exception
			return gcerrors.InvalidArgument
		case pgErr.Code[:2] == "28", pgErr.Code == "42501": // authorization
			return gcerrors.PermissionDenied
		case pgErr.Code[:2] == "42": // syntax or undefined object
			return gcerrors.Internal
		}
		return gcerrors.Unknown
	}
	return gcerrors.Code(err)
}
