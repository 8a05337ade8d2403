package local_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/heraldevents/herald/local"
)

// TestOrderFlow is the example of docs/testing.md ("Herald in your own
// tests"), kept here so it always compiles and passes as printed.
func TestOrderFlow(t *testing.T) {
	h := local.Start(t) // h.URL, h.Token
	req, _ := http.NewRequest("POST", h.URL+"/api/v1beta/events",
		strings.NewReader(`{"event":{"event_type":"shop.order.placed","message":{"id":1}}}`))
	req.Header.Set("Authorization", "Bearer "+h.Token)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("publish: %s", res.Status)
	}
}
