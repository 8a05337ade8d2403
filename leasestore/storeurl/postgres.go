//go:build !herald_aws

package storeurl

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"gocloud.dev/docstore"

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore/pgdocstore"
)

var openPostgres openFunc = (*Opener).openPostgres

// pgUndefinedDatabase is PostgreSQL's SQLSTATE for a database that does
// not exist (invalid_catalog_name; PostgreSQL documentation, appendix A).
const pgUndefinedDatabase = "3D000"

// DefaultPostgresTable is the table a postgres:// URL without table=
// stores the lease store in.
const DefaultPostgresTable = "herald"

// DefaultPostgresConnectTimeout bounds a connection attempt when the URL
// sets no connect_timeout.
const DefaultPostgresConnectTimeout = 5 * time.Second

// DefaultPostgresMaxConns is the least pool_max_conns a PostgreSQL store
// gets when its URL sets none: enough connections for a burst of stream
// opens or pulls to commit together.
const DefaultPostgresMaxConns = 16

// postgresParams are the query parameters a postgres:// URL may set:
// table (Herald's), then the connection and pool settings pgx reads.
var postgresParams = []string{
	"table",
	"sslmode", "sslrootcert", "sslcert", "sslkey", "sslpassword", "sslsni",
	"connect_timeout", "application_name", "target_session_attrs",
	"pool_max_conns", "pool_min_conns", "pool_max_conn_lifetime",
	"pool_max_conn_idle_time", "pool_health_check_period",
}

// openPostgres opens postgres://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE[?table=T&…]
// (or postgresql://) as a pgdocstore collection on a pool of its own,
// closed with the collection.
func (o *Opener) openPostgres(ctx context.Context, u *url.URL) (*docstore.Collection, error) {
	scheme := u.Scheme
	p, err := params(u, postgresParams...)
	if err != nil {
		return nil, err
	}
	if u.Host == "" || strings.Trim(u.Path, "/") == "" {
		return nil, herr.New(herr.InvalidArgument, "store URL %s://: give the server and database, as in %s://USER@HOST:5432/DATABASE?table=herald", scheme, scheme)
	}
	table := DefaultPostgresTable
	if t, ok := p["table"]; ok {
		table = t
	}
	q := u.Query()
	q.Del("table")
	conn := *u
	conn.RawQuery = q.Encode()
	cfg, err := pgxpool.ParseConfig(conn.String())
	if err != nil {
		// pgx's message would quote the settings; say only what is wrong.
		return nil, herr.New(herr.InvalidArgument, "store URL %s://: a connection or pool setting is malformed", scheme)
	}
	if plaintextAllowed(u, cfg) {
		// TLS cost Herald about a tenth of its CPU on a loopback
		// database (docs/benchmarks.md), and protects nothing there.
		q.Set("sslmode", "disable")
		conn.RawQuery = q.Encode()
		if cfg, err = pgxpool.ParseConfig(conn.String()); err != nil {
			return nil, herr.New(herr.InvalidArgument, "store URL %s://: a connection or pool setting is malformed", scheme)
		}
	}
	if _, ok := p["connect_timeout"]; !ok {
		cfg.ConnConfig.ConnectTimeout = DefaultPostgresConnectTimeout
	}
	if !q.Has("pool_max_conns") {
		// pgx's default, one per CPU (at least 4), queues a burst of
		// stream opens or pulls behind a few connections, each waiting
		// for its own commit to reach the disk; more connections commit
		// together (PostgreSQL flushes the WAL of every commit ready at
		// once).
		cfg.MaxConns = max(cfg.MaxConns, DefaultPostgresMaxConns)
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, herr.New(herr.InvalidArgument, "store URL %s://: cannot make a connection pool", scheme)
	}
	coll, err := pgdocstore.OpenCollection(ctx, pool, table, &pgdocstore.Options{
		KeyField: KeyField,
		// ListConsumers and the periodic jobs select records by kind.
		IndexFields: []string{"kind"},
		ClosePool:   true,
	})
	if err != nil {
		pool.Close()
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == pgUndefinedDatabase {
			// Told apart from an unreachable server: the server answered,
			// and what to run is known. The user and database names are
			// not secrets; the password is never repeated.
			db, user := strings.Trim(u.Path, "/"), "postgres"
			if u.User != nil && u.User.Username() != "" {
				user = u.User.Username()
			}
			return nil, herr.New(herr.FailedPrecondition, "PostgreSQL at %s has no database %q: create it (createdb -h %s -p %s -U %s %s) or name an existing database in the store URL",
				u.Host, db, cfg.ConnConfig.Host, strconv.Itoa(int(cfg.ConnConfig.Port)), user, db)
		}
		code := herr.FromGocloud(pgdocstore.ErrorCode(err))
		switch code {
		case herr.InvalidArgument:
			return nil, herr.New(code, "store URL %s://: table %q: a table name is a letter or underscore, then up to 47 letters, digits or underscores", scheme, table)
		case herr.FailedPrecondition:
			return nil, herr.Wrap(code, err, "PostgreSQL table "+table+" exists with other columns; the lease store needs key text, revision bigint, doc jsonb")
		case herr.PermissionDenied:
			return nil, herr.Wrap(code, err, "PostgreSQL refused the lease store's role: it must be able to log in, and create (or read and write) table "+table)
		case herr.Unknown, herr.DeadlineExceeded, herr.Canceled:
			return nil, herr.Wrap(herr.Unavailable, err, "PostgreSQL at "+u.Host+" is unreachable or refused the connection")
		}
		return nil, herr.Wrap(code, err, "PostgreSQL could not open table "+table)
	}
	return coll, nil
}

// plaintextAllowed reports whether a store URL may connect without TLS:
// it sets no sslmode, nor does PGSSLMODE (so the mode is libpq's default,
// prefer, which already falls back to plaintext), and every host it names
// is a loopback address (127.0.0.0/8, ::1 or localhost), where the
// traffic never leaves the machine. A URL that asks for any sslmode gets
// exactly that mode.
func plaintextAllowed(u *url.URL, cfg *pgxpool.Config) bool {
	if u.Query().Has("sslmode") || os.Getenv("PGSSLMODE") != "" {
		return false
	}
	hosts := []string{cfg.ConnConfig.Host}
	for _, f := range cfg.ConnConfig.Fallbacks {
		hosts = append(hosts, f.Host)
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); h != "localhost" && (ip == nil || !ip.IsLoopback()) {
			return false
		}
	}
	return true
}
