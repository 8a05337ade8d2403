//go:build !herald_aws

package storeurl

import (
	"context"
	"net/url"
	"os"
	"path"
	"regexp"
	"sync"

	vkit "cloud.google.com/go/firestore/apiv1"
	"gocloud.dev/docstore"
	"gocloud.dev/docstore/gcpfirestore"
	"gocloud.dev/gcp"

	"github.com/heraldevents/herald/herr"
)

// firestoreClient is the type of Opener.Firestore in a build that links
// Firestore.
type firestoreClient = *vkit.Client

var openFirestore openFunc = (*Opener).openFirestore

// EmulatorHostEnv names the variable that points Firestore clients at an
// emulator (host:port), the one Google's client libraries read.
const EmulatorHostEnv = "FIRESTORE_EMULATOR_HOST"

// collectionPathRE matches a Firestore collection resource path: a
// database's documents, then a collection, optionally nested under documents.
var collectionPathRE = regexp.MustCompile(`^projects/[^/]+/databases/[^/]+/documents/[^/]+(/[^/]+/[^/]+)*$`)

// openFirestore opens
// firestore://projects/P/databases/D/documents/COLLECTION?name_field=key.
func (o *Opener) openFirestore(ctx context.Context, u *url.URL) (*docstore.Collection, error) {
	p, err := params(u, "name_field")
	if err != nil {
		return nil, err
	}
	if err := requireKeyField("firestore", "name_field", p["name_field"]); err != nil {
		return nil, err
	}
	collPath := path.Join(u.Host, u.Path)
	if !collectionPathRE.MatchString(collPath) {
		return nil, herr.New(herr.InvalidArgument, "store URL firestore://: the path must be projects/PROJECT/databases/DATABASE/documents/COLLECTION")
	}
	client := o.Firestore
	if client == nil {
		if client, err = sharedFirestoreClient(ctx); err != nil {
			return nil, err
		}
	}
	coll, err := gcpfirestore.OpenCollection(client, collPath, KeyField, nil)
	if err != nil {
		return nil, herr.Wrap(herr.InvalidArgument, err, "store URL firestore://: cannot open the collection")
	}
	return coll, nil
}

var firestoreClients struct {
	mu sync.Mutex
	m  map[string]*vkit.Client // by emulator host; "" is production
}

// sharedFirestoreClient returns the process's client for the current
// FIRESTORE_EMULATOR_HOST, dialing it on first use.
func sharedFirestoreClient(ctx context.Context) (*vkit.Client, error) {
	host := os.Getenv(EmulatorHostEnv)
	firestoreClients.mu.Lock()
	defer firestoreClients.mu.Unlock()
	if c, ok := firestoreClients.m[host]; ok {
		return c, nil
	}
	c, err := DialFirestore(ctx)
	if err != nil {
		return nil, err
	}
	if firestoreClients.m == nil {
		firestoreClients.m = make(map[string]*vkit.Client)
	}
	firestoreClients.m[host] = c
	return c, nil
}

// DialFirestore returns a new Firestore client: over plain gRPC without
// credentials to the emulator at FIRESTORE_EMULATOR_HOST when it is set,
// else to Google with Application Default Credentials. The caller closes it.
func DialFirestore(ctx context.Context) (*vkit.Client, error) {
	var ts gcp.TokenSource
	if os.Getenv(EmulatorHostEnv) == "" {
		creds, err := gcp.DefaultCredentials(ctx)
		if err != nil {
			return nil, herr.Wrap(herr.Unauthenticated, err, "Firestore: no Application Default Credentials (set "+EmulatorHostEnv+" to use an emulator)")
		}
		ts = gcp.CredentialsTokenSource(creds)
	}
	// gcpfirestore.Dial reads FIRESTORE_EMULATOR_HOST itself and then
	// ignores ts.
	c, _, err := gcpfirestore.Dial(ctx, ts)
	if err != nil {
		return nil, herr.Wrap(herr.Unavailable, err, "Firestore: dial")
	}
	return c, nil
}
