package router_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/functions/router"
)

// FuzzRESTBodies sends one fuzzed body to every REST endpoint that takes
// one: each answers with a status below 500 and the one JSON error shape,
// never a panic, whatever the bytes.
func FuzzRESTBodies(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"event":{"event_type":"a.b","message":{"k":1}}}`,
		`{"events":[{"event_type":"a"},{"event_type":"b","message":{"x":[1,{"y":null}]}}]}`,
		`{"type":"DURABLE_CONSUMER","filter_groups":[{"event_type":"a","filters":[{"filter_type":"eq","resource_id":"r"}]}]}`,
		`{"leaseId":"l","generation":0,"status":"failed","delay":30}`,
		`{"queue_id":"q","filter_groups":[]}`, `{"actions":[{"id":"x","action":"REPLAY"}]}`,
		`{"status":"ok","status":"failed"}`, "{\"event\":{\"event_type\":\"a\",\"message\":{\"s\":\"\xff\"}}}",
	} {
		f.Add([]byte(s))
	}
	svc := newService(f)
	h := router.ForFunction(svc, auth.DevToken("tok"), config.All)
	var routes []router.Route
	for _, r := range router.Routes() {
		if r.Method == "POST" || r.Method == "PATCH" {
			routes = append(routes, r)
		}
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, r := range routes {
			path := strings.NewReplacer("{id}", "no-such-id", "{job}", "no-such-job").Replace(r.Path)
			req := httptest.NewRequest(r.Method, path, strings.NewReader(string(body)))
			req.Header.Set("Authorization", "Bearer tok")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if rec.Code >= 500 {
				t.Fatalf("%s %s: %d %s", r.Method, r.Path, rec.Code, rec.Body)
			}
			if rec.Code >= 400 {
				var e struct{ Code, Message string }
				if json.Unmarshal(rec.Body.Bytes(), &e) != nil || e.Code == "" || e.Message == "" {
					t.Fatalf("%s %s: %d without the error shape: %s", r.Method, r.Path, rec.Code, rec.Body)
				}
			}
		}
	})
}

// TestUnknownMembersAreRefused (delivery controls: strict request bodies):
// every REST endpoint that takes a body answers 400 naming an unknown or
// repeated member — but the notifications API's two publish bodies, whose
// published schemas allow additional properties: they ignore an unknown
// member (and then miss their event: 422), and only a repeated one is
// 400.
func TestUnknownMembersAreRefused(t *testing.T) {
	t.Parallel()
	h := router.ForFunction(newService(t), auth.DevToken("tok"), config.All)
	for _, r := range router.Routes() {
		if r.Method != "POST" && r.Method != "PATCH" {
			continue
		}
		path := strings.NewReplacer("{id}", "no-such-id", "{job}", "no-such-job").Replace(r.Path)
		for body, want := range map[string]string{
			`{"delay":30}`:          `unknown field \"delay\"`,
			`{"Delay":1,"delay":2}`: `unknown field \"Delay\"`,
		} {
			if strings.HasSuffix(r.Path, "/pause") || strings.HasSuffix(r.Path, "/resume") || strings.HasSuffix(r.Path, "/pull") || strings.HasSuffix(r.Path, "/rotate-secret") || strings.Contains(r.Path, "/jobs/") {
				continue // these take no body
			}
			req := httptest.NewRequest(r.Method, path, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer tok")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			if strings.HasPrefix(r.Path, "/api/v1beta/events") {
				if rec.Code != http.StatusUnprocessableEntity || strings.Contains(rec.Body.String(), "unknown field") {
					t.Errorf("%s %s %s: want 422 (the member ignored, no event): %d %s", r.Method, r.Path, body, rec.Code, rec.Body)
				}
				continue
			}
			if rec.Code != http.StatusBadRequest || !strings.Contains(rec.Body.String(), want) {
				t.Errorf("%s %s %s: %d %s", r.Method, r.Path, body, rec.Code, rec.Body)
			}
		}
	}
}

// TestPoisonPayloadsAreRefused (issue: an event with invalid UTF-8 in its
// message, or nested 6,000 deep, published fine and then stalled every
// consumer): publish answers 422 naming the rule, single and per event of
// a batch.
func TestPoisonPayloadsAreRefused(t *testing.T) {
	t.Parallel()
	h := router.ForFunction(newService(t), auth.DevToken("tok"), config.All)
	deep := strings.Repeat(`{"a":`, delivery.MaxMessageDepth+1) + "1" + strings.Repeat("}", delivery.MaxMessageDepth+1)
	ok := strings.Repeat(`{"a":`, delivery.MaxMessageDepth) + "1" + strings.Repeat("}", delivery.MaxMessageDepth)
	post := func(path, body string) *httptest.ResponseRecorder {
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		return rec
	}
	for body, want := range map[string]string{
		"{\"event\":{\"event_type\":\"a\",\"message\":{\"s\":\"\xff\"}}}":            "UTF-8",
		`{"event":{"event_type":"a","message":{"s":"\ud800"}}}`:                      "UTF-8",
		`{"event":{"event_type":"a","message":` + deep + `}}`:                        "32 levels",
		`{"event":{"event_type":"a","message":{"k":1,"k":2}}}`:                       "duplicate",
		"{\"event\":{\"event_type\":\"a\",\"resource\":{\"resource_id\":\"\xfe\"}}}": "UTF-8",
	} {
		rec := post("/api/v1beta/events", body)
		if want == "duplicate" {
			require.Equal(t, http.StatusBadRequest, rec.Code, rec.Body.String())
		} else {
			require.Equal(t, http.StatusUnprocessableEntity, rec.Code, rec.Body.String())
		}
		require.Contains(t, rec.Body.String(), want)
	}
	rec := post("/api/v1beta/events", `{"event":{"event_type":"a","message":`+ok+`}}`)
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())

	// In a batch the poison event fails alone.
	rec = post("/api/v1beta/events/batch", "{\"events\":[{\"event_type\":\"a\"},{\"event_type\":\"a\",\"message\":{\"s\":\"\xff\"}},{\"event_type\":\"a\",\"message\":"+deep+"}]}")
	require.Equal(t, http.StatusOK, rec.Code, rec.Body.String())
	var res struct {
		Results []struct {
			Success       bool   `json:"success"`
			FailureReason string `json:"failure_reason"`
		} `json:"results"`
	}
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &res))
	require.Len(t, res.Results, 3)
	require.True(t, res.Results[0].Success, res.Results[0].FailureReason)
	require.False(t, res.Results[1].Success)
	require.Contains(t, res.Results[1].FailureReason, "UTF-8")
	require.False(t, res.Results[2].Success)
	require.Contains(t, res.Results[2].FailureReason, "32 levels")
}
