// Package storeurl opens the docstore collection a leasestore.Store runs on
// from a URL: the HERALD_STORE_URL of the local adapter, and the same string
// a cloud deployment sets. Changing the URL moves the lease store from
// memory to DynamoDB or Firestore without changing code.
//
// # URLs
//
//	mem://COLLECTION/key
//	dynamodb://TABLE?partition_key=key[&region=R][&endpoint=URL][&profile=P]
//	firestore://projects/P/databases/D/documents/COLLECTION?name_field=key
//	postgres://[USER[:PASSWORD]@]HOST[:PORT]/DATABASE[?table=herald&…]   (or postgresql://)
//
// Every scheme but postgres names the key field, and it must be "key", the
// field leasestore's records are keyed by (a PostgreSQL table's key is its
// key column). Query parameters:
//
//   - mem: none. The collection lives in the process's memory and is gone
//     when the process ends; collections of one name are shared within a
//     process (memdocstore's URL opener). memdocstore's filename option is
//     refused: it wrote the file only at a clean shutdown, and not
//     atomically, so a crash lost or rolled back consumers, cursors and
//     leases (a cursor moved backward, sequence numbers were reused) and a
//     crash while saving left a file Herald could not start from. State that
//     must survive restarts and crashes belongs in PostgreSQL (postgres://,
//     a single server is enough) or a cloud store.
//
//   - dynamodb: partition_key (required, "key"); region (default: the AWS
//     SDK's, AWS_REGION or the shared config; one of them is required);
//     endpoint, an http(s) base URL that replaces the regional endpoint (a
//     local moto_server or DynamoDB Local, a VPC endpoint); profile, a shared
//     config profile. Credentials come from the AWS SDK's default chain
//     (environment, shared files, SSO, web identity, container or instance
//     role); they never go in the URL.
//
//   - firestore: name_field (required, "key"). With FIRESTORE_EMULATOR_HOST
//     set (host:port) the client talks plain gRPC to that emulator with no
//     credentials; otherwise it uses Application Default Credentials.
//
//   - postgres, postgresql: table, the table the records live in (default
//     "herald"; a letter or underscore, then up to 47 letters, digits or
//     underscores), created with its sequence and an index on the record
//     kind when absent (leasestore/pgdocstore describes it); and pgx's
//     connection and pool settings: sslmode, sslrootcert, sslcert, sslkey,
//     sslpassword, sslsni, connect_timeout (seconds; default 5),
//     application_name, target_session_attrs, pool_max_conns (default
//     max(16, CPUs): DefaultPostgresMaxConns), pool_min_conns, pool_max_conn_lifetime,
//     pool_max_conn_idle_time, pool_health_check_period. A password may be
//     left out of the URL and given by PGPASSWORD or a ~/.pgpass file (pgx
//     reads both); messages never repeat the URL, and the local adapter
//     logs it with the password redacted.
//
// Anything else (another scheme, an unknown or repeated parameter, another
// key field) is refused with herr.InvalidArgument naming the scheme or the
// parameter, so that a typo in configuration fails at start-up rather than
// silently falling back to a default.
//
// Reads are always strongly consistent, and DynamoDB scans are always
// allowed: the lease state machine reads a consumer record and writes it
// back conditioned on the revision it read, and an acknowledgement that read
// a stale record would answer "stale" for a lease that exists. ListConsumers
// filters on a non-key field, which DynamoDB can answer only by a scan.
// That is why allow_scans and consistent_read are not parameters.
//
// # DynamoDB table
//
// One table holds every record; CreateTable makes it:
//
//	attribute  key (S), the partition key; no sort key
//	billing    PAY_PER_REQUEST
//	items      "c:<consumer id>"             kind "consumer": the consumer,
//	                                         its lease table and cursor
//	           "p:<consumer id>:<lease id>"  kind "payload": one lease's events
//
// (leasestore's package doc is the authority on record kinds; any kind it
// adds lives in the same table under the same key.)
//
// Every state change is a PutItem conditioned on the item's
// DocstoreRevision attribute (docstore's Replace), so two Herald instances
// racing on one consumer never both win. Consumer and lease ids are UUIDs
// or the notifications API queue ids, so keys spread over partitions.
//
// Sizes and costs: a payload item holds at most
// leasestore.DefaultMaxPayloadBytes (350,000) bytes of events plus a few
// bytes per event, under the 400 KB item limit. A consumer item carries its
// lease table: about 150 bytes per open lease and 25 per acknowledged range
// above the cursor, so the largest table (1,000 single-event leases with
// 999 acked ranges between them) is about 75 KB. Writes cost one WCU per KB
// of the whole item and one item takes at most 1,000 WCU a second, so a
// consumer with a full window pays about 75 WCUs per pull and per
// acknowledgement and tops out near 13 of them a second; a consumer that
// keeps up (a few open leases) pays 1 or 2. ListConsumers filters on
// "kind", which DynamoDB can only do by scanning the whole table, payload
// items included, paying read capacity for every byte: it is an
// operator's call, never on the delivery path.
//
// The table has no TTL attribute. Payload items are removed when their
// lease is committed or their consumer deleted; the only leftovers are
// payloads of a failed best-effort delete or a crash between writing a
// payload and writing its lease. A TTL cannot tell those from the payload of
// a live lease, because nothing bounds how long a lease stays open (it is
// requeued and redelivered until acknowledged, and a paused consumer keeps
// its leases indefinitely): an expiry would delete events that are still
// owed, which is a loss. Leftovers are unreachable and cost only storage; a
// sweep that compares payload items with their consumer's lease table is the
// safe way to remove them.
//
// # Firestore
//
// One collection holds every record; the document id is the "key" field.
// Document ids may not contain '/' and may not be "." or "..", or match
// __.*__; leasestore's keys are "c:" and "p:" followed by ids that Herald
// makes as UUIDs or takes from the notifications API's queue_id rule [A-Za-z0-9._-], so
// they are valid (the prefix keeps "." and ".." out). An id with '/' is
// refused by Firestore or, with two of them, nests the record in a
// subcollection where ListConsumers does not see it: a consumer id must not
// contain '/'. Every state change is an update with an update-time
// precondition. No composite index is needed (ListConsumers filters on
// "kind" alone); in production, exempt the large fields "events", "leases"
// and "acked" from indexing to keep writes cheap. Every pull of new work
// and every acknowledgement rewrites the consumer's document, and
// Firestore advises keeping sustained writes to one document low (about
// one a second): a busy consumer on Firestore sees more lost races, which
// the store retries, so pull large batches.
//
// # Builds
//
// The default build opens every scheme. Built with -tags herald_aws (the
// Lambda bootstrap) it opens mem and dynamodb only and links no Google
// client or pgx; with -tags herald_gcp (the Cloud Run server) mem,
// firestore and postgres (Cloud SQL for PostgreSQL) only and links no AWS
// SDK (internal/cloudbuild). A URL of a scheme the
// build leaves out is refused with herr.InvalidArgument saying so. The
// exported names for one backend (CreateTable and TableInput, DialFirestore
// and EmulatorHostEnv) exist only in the builds that link it.
//
// # Errors
//
// Open returns herr.InvalidArgument for a bad URL or a scheme this build
// leaves out, herr.NotFound when the
// DynamoDB table does not exist, herr.FailedPrecondition when it (or a
// PostgreSQL table) exists with another key schema or columns,
// herr.PermissionDenied when PostgreSQL refuses the role, and
// herr.Unavailable when the backend cannot be reached.
package storeurl

import (
	"context"
	"net/url"
	"slices"
	"strings"

	"gocloud.dev/docstore"
	_ "gocloud.dev/docstore/memdocstore" // the mem:// scheme

	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/internal/cloudbuild"
)

// KeyField is the docstore field leasestore's records are keyed by; every
// URL must name it as its key field.
const KeyField = "key"

// Opener opens store URLs. The zero value builds its own clients; the
// fields let a caller supply them (tests, or a process that already has a
// configured client). An Opener is safe for concurrent use.
type Opener struct {
	// DynamoDB (a *dynamodb.Client), if non-nil, serves dynamodb:// URLs,
	// which may then not set region, endpoint or profile (the client
	// already decides them). Nil: every Open builds a client from the URL
	// and the AWS SDK's default configuration. In a build without
	// DynamoDB (herald_gcp) it is a placeholder that stays nil.
	DynamoDB dynamoDBClient
	// Firestore (a *vkit.Client, cloud.google.com/go/firestore/apiv1), if
	// non-nil, serves firestore:// URLs. Nil: Open dials a client on first
	// use (one per FIRESTORE_EMULATOR_HOST value) and keeps it for the life
	// of the process, because a docstore.Collection cannot close the client
	// it runs on. In a build without Firestore (herald_aws) it is a
	// placeholder that stays nil.
	Firestore firestoreClient
}

// openFunc opens a store URL of one scheme.
type openFunc func(o *Opener, ctx context.Context, u *url.URL) (*docstore.Collection, error)

// schemes is every store URL scheme, in the order messages list them. A
// nil open means this build leaves the scheme out: dynamodb.go and
// firestore.go set openDynamoDB and openFirestore in the builds that link
// them (internal/cloudbuild), and *_off.go leave them nil in the others.
var schemes = []struct {
	name string
	open openFunc
}{
	{"mem", func(_ *Opener, ctx context.Context, u *url.URL) (*docstore.Collection, error) { return openMem(ctx, u) }},
	{"dynamodb", openDynamoDB},
	{"firestore", openFirestore},
	{"postgres", openPostgres},
	{"postgresql", openPostgres},
}

// Schemes lists the store URL schemes this build opens, sorted.
func Schemes() []string {
	var out []string
	for _, s := range schemes {
		if s.open != nil {
			out = append(out, s.name)
		}
	}
	slices.Sort(out)
	return out
}

// supported lists the schemes this build opens, for messages.
func supported() string {
	var out []string
	for _, s := range schemes {
		if s.open != nil {
			out = append(out, s.name)
		}
	}
	return strings.Join(out, ", ")
}

var defaultOpener Opener

// Open opens the collection rawURL names, with the zero Opener; see the
// package doc for the URL forms. The caller closes the collection.
func Open(ctx context.Context, rawURL string) (*docstore.Collection, error) {
	return defaultOpener.Open(ctx, rawURL)
}

// Open opens the collection rawURL names; see the package doc for the URL
// forms. The caller closes the collection.
func (o *Opener) Open(ctx context.Context, rawURL string) (*docstore.Collection, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// Neither the URL nor url.Error (which quotes it) is repeated: a
		// postgres:// URL may carry a password.
		return nil, herr.New(herr.InvalidArgument, "store URL is not a URL")
	}
	if u.Scheme == "" {
		return nil, herr.New(herr.InvalidArgument, "store URL has no scheme (supported: %s)", supported())
	}
	for _, s := range schemes {
		if s.name != u.Scheme {
			continue
		}
		if s.open == nil {
			return nil, cloudbuild.LeftOut("store URL", s.name)
		}
		return s.open(o, ctx, u)
	}
	return nil, herr.New(herr.InvalidArgument, "store URL scheme %q is not supported (supported: %s)", u.Scheme, supported())
}

// params checks u's query against the parameters a scheme allows and
// returns the single value of each one present.
func params(u *url.URL, allowed ...string) (map[string]string, error) {
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return nil, herr.Wrap(herr.InvalidArgument, err, "store URL "+u.Scheme+"://: malformed query")
	}
	out := make(map[string]string, len(q))
	for name, values := range q {
		if !slices.Contains(allowed, name) {
			return nil, herr.New(herr.InvalidArgument, "store URL %s://: unknown query parameter %q (supported: %s)",
				u.Scheme, name, strings.Join(allowed, ", "))
		}
		if len(values) != 1 {
			return nil, herr.New(herr.InvalidArgument, "store URL %s://: query parameter %q is given %d times", u.Scheme, name, len(values))
		}
		out[name] = values[0]
	}
	return out, nil
}

// requireKeyField checks that a URL names KeyField as its key field.
func requireKeyField(scheme, where, got string) error {
	if got != KeyField {
		return herr.New(herr.InvalidArgument, "store URL %s://: %s must be %q, the lease store's key field (got %q)",
			scheme, where, KeyField, got)
	}
	return nil
}

// openMem opens a memdocstore collection through docstore's default URL
// mux, so that one name means one collection within the process.
func openMem(ctx context.Context, u *url.URL) (*docstore.Collection, error) {
	if u.Query().Has("filename") {
		return nil, herr.New(herr.InvalidArgument, "store URL mem://: filename is not supported: the in-memory store is not crash-safe (the file was written only at shutdown); for state that survives restarts and crashes use postgres://USER@HOST:5432/DATABASE (docs/backends.md)")
	}
	if _, err := params(u); err != nil {
		return nil, err
	}
	if u.Host == "" {
		return nil, herr.New(herr.InvalidArgument, "store URL mem://: the collection name (the URL's host) is empty")
	}
	if err := requireKeyField("mem", "the key field (the URL's path)", strings.TrimPrefix(u.Path, "/")); err != nil {
		return nil, err
	}
	coll, err := docstore.DefaultURLMux().OpenCollectionURL(ctx, u)
	if err != nil {
		return nil, herr.Wrap(herr.InvalidArgument, err, "store URL mem://: cannot open the collection")
	}
	return coll, nil
}
