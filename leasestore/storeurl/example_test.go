package storeurl_test

import (
	"context"
	"fmt"

	"github.com/heraldevents/herald/leasestore/storeurl"
)

// Open a lease store collection by URL. mem:// is the in-memory store of
// the local adapter; dynamodb:// and firestore:// open the cloud ones with
// the same code. The URL's path names the key field, which Herald's lease
// store requires to be "key".
func ExampleOpen() {
	ctx := context.Background()
	coll, err := storeurl.Open(ctx, "mem://example-open/key")
	if err != nil {
		fmt.Println("open:", err)
		return
	}
	defer coll.Close()

	doc := map[string]any{"key": "greeting", "text": "hello"}
	if err := coll.Put(ctx, doc); err != nil {
		fmt.Println("put:", err)
		return
	}
	got := map[string]any{"key": "greeting"}
	if err := coll.Get(ctx, got); err != nil {
		fmt.Println("get:", err)
		return
	}
	fmt.Println(got["text"])

	// A URL with a parameter the opener does not know is refused, naming it.
	_, err = storeurl.Open(ctx, "mem://example-open/key?colour=blue")
	fmt.Println(err != nil)
	// Output:
	// hello
	// true
}
