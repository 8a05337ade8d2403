package local_test

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/heraldevents/herald/local"
)

// Start runs a whole Herald in-process for a test, on a free port with
// fresh in-memory drivers, and stops it when the test ends. This example
// shows the shape of such a test; TestOrderFlow runs the same flow.
func ExampleStart() {
	testPublish := func(t *testing.T) {
		h := local.Start(t) // h.URL, h.Token
		req, _ := http.NewRequest("POST", h.URL+"/api/v1beta/events",
			strings.NewReader(`{"event":{"event_type":"shop.order.placed","message":{"id":1}}}`))
		req.Header.Set("Authorization", "Bearer "+h.Token)
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		body, _ := io.ReadAll(res.Body)
		if res.StatusCode != http.StatusOK || !strings.Contains(string(body), `"success":true`) {
			t.Fatalf("publish: %s %s", res.Status, body)
		}
	}
	fmt.Printf("%T\n", testPublish)
	// Output: func(*testing.T)
}
