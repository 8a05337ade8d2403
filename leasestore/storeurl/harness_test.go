//go:build !herald_aws && !herald_gcp

package storeurl_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"gocloud.dev/docstore"
)

// countKind counts the documents of coll whose kind is kind, checking that
// each one's key has the prefix of its kind ("c:" or "p:").
func countKind(ctx context.Context, coll *docstore.Collection, kind string) (int, error) {
	it := coll.Query().Where("kind", "=", kind).Get(ctx, "key")
	defer it.Stop()
	n := 0
	for {
		doc := map[string]any{}
		err := it.Next(ctx, doc)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return 0, err
		}
		if !strings.HasPrefix(fmt.Sprint(doc["key"]), kind[:1]+":") {
			return 0, fmt.Errorf("document %v of kind %q has a key of another kind", doc["key"], kind)
		}
		n++
	}
}
