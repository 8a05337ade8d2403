package emulators_test

import (
	"net/http"
	"testing"

	"github.com/heraldevents/herald/internal/emulators"
)

// TestMotoSingleThreadedServes checks the single-threaded launcher really
// serves moto's API (its management endpoint answers 200).
func TestMotoSingleThreadedServes(t *testing.T) {
	ep := emulators.MotoSingleThreaded(t)
	res, err := http.Get(ep + "/moto-api/")
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		t.Fatalf("moto-api answered %s", res.Status)
	}
}
