// Package pgdocstore is a gocloud.dev/docstore driver for PostgreSQL, over
// github.com/jackc/pgx/v5: the lease store's backend for self-hosted
// deployments (HERALD_STORE_URL=postgres://…, see leasestore/storeurl), and
// Cloud SQL for PostgreSQL next to Cloud Run.
//
// It lives under leasestore/ because it exists for the lease store, which
// stays one implementation over docstore; it is a separate, exported
// package because it is a complete docstore driver, held to gocloud's own
// conformance suite (gocloud.dev/docstore/drivertest), which an
// application that embeds leasestore can open on its own pool. gocloud.dev
// ships no PostgreSQL driver.
//
// # Table
//
// One collection is one table, created with its sequence (and any
// Options.IndexFields indexes) when absent:
//
//	CREATE SEQUENCE TABLE_revision;
//	CREATE TABLE TABLE (
//	    key      text COLLATE "C" PRIMARY KEY, -- the document's key
//	    revision bigint,                        -- NULL for a document without a revision field
//	    doc      jsonb NOT NULL                 -- every field but the revision
//	);
//	CREATE INDEX TABLE_FIELD_idx ON TABLE ((doc -> 'FIELD')); -- per index field
//
// The creation runs under a transaction-scoped advisory lock, so several
// processes may start at once. A database role that may not create tables
// can use a table made beforehand with these statements.
//
// # Revisions and atomicity
//
// Every write of a document with a revision field takes a new revision
// from the table's sequence, so a revision is never reused, not even by a
// document deleted and created again. A write conditioned on a revision is
// one statement (UPDATE or DELETE … WHERE key = $1 AND revision = $2),
// atomic on the server under PostgreSQL's default READ COMMITTED
// isolation: of two writers holding one revision exactly one succeeds, the
// other gets FailedPrecondition (NotFound when the document is gone).
// Create is INSERT … ON CONFLICT DO NOTHING (AlreadyExists); Put without a
// revision is an upsert. Update reads the row FOR UPDATE, applies the mods
// and writes it back in one transaction.
//
// An action list's AtomicWrites run in one transaction: all of them or
// none (drivertest's MultiplePartitions: any keys). Without an Update
// among them they are one pipeline of statements (a pgx batch), which
// PostgreSQL runs as one implicit transaction: one round trip to commit.
// A conditional write there that finds no row fails its statement, so
// that the transaction rolls back; the document is then read once more to
// tell NotFound from FailedPrecondition. An action list's gets are one
// pipeline too. The other writes run one statement each, up to four at a
// time.
//
// # Encoding
//
// Documents are stored as JSONB. Integers and floats are kept apart (a
// float is written with a fraction); bytes, times, NaN and infinities, and
// strings JSONB cannot hold (NUL or invalid UTF-8) are stored as
// one-member objects tagged "$bytes", "$time", "$float" and "$str"; a map
// key beginning with '$' is stored with one more '$'. Times come back in
// UTC with nanoseconds. Bytes cost base64's 4/3 in storage.
//
// # Queries
//
// Filters compare numbers by value, strings by bytes and times by instant;
// a field of another type never matches. An "=" filter on an index field
// uses its index. A query without OrderBy or Offset reads pages of 500
// documents in key order, one statement each, the next when Next needs it;
// an ordered query is one statement whose rows are read at once (at most
// 100,000, else ResourceExhausted). No connection is held between calls of
// Next.
//
// # Bounds
//
// Every statement and transaction runs under the caller's context and
// Options.StatementTimeout (default 10 s); a cancelled context cancels the
// statement on the server (pgx sends a cancel request). A document's JSON is
// refused over Options.MaxDocumentBytes (default 4 MiB) with
// InvalidArgument.
//
// # Errors
//
// NotFound, AlreadyExists, FailedPrecondition and InvalidArgument as
// docstore defines them; Canceled and DeadlineExceeded from contexts and
// statement timeouts; ResourceExhausted for PostgreSQL's resource classes
// (53xxx) and limits (54000); PermissionDenied for authorization failures;
// Unknown for a connection that cannot be made or broke.
//
// # As
//
// Collection.As exposes the *pgxpool.Pool; ErrorAs a *pgconn.PgError.
package pgdocstore
