package delivery_test

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/herr"
)

// FuzzReconnectToken: a token that passes is 1 to 200 visible ASCII
// characters; a refusal quotes none of it.
func FuzzReconnectToken(f *testing.F) {
	for _, s := range []string{"nd-0123", "", "a b", "tok\x00en", strings.Repeat("t", 201), "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		err := delivery.ValidateReconnectToken("reconnect_token", s)
		if err == nil {
			if len(s) < 1 || len(s) > delivery.MaxReconnectTokenLength || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r >= 0x7f }) {
				t.Fatalf("accepted %q", s)
			}
			return
		}
		if len(s) > 3 && strings.Contains(herr.MessageOf(err), s) {
			t.Fatalf("the refusal quotes the token")
		}
	})
}

// FuzzQueueID: a queue id that passes matches the documented pattern.
func FuzzQueueID(f *testing.F) {
	for _, s := range []string{"orders-q", "", "a b", "q\n", strings.Repeat("q", 201), "ü"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if delivery.ValidateQueueID(s) != nil {
			return
		}
		if len(s) < 1 || len(s) > 200 || strings.ContainsFunc(s, func(r rune) bool {
			return !(r == '.' || r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'))
		}) {
			t.Fatalf("accepted %q", s)
		}
	})
}

// FuzzEventValidate: a published message that passes is one JSON object
// of valid UTF-8 nested at most MaxMessageDepth deep, which decodes.
func FuzzEventValidate(f *testing.F) {
	for _, s := range []string{`{}`, `{"a":[1,{"b":"c"}]}`, `{"a":1,"a":2}`, "{\"a\":\"\xff\"}", `{"a":"\udc00"}`, strings.Repeat(`{"a":`, 40) + "1" + strings.Repeat("}", 40)} {
		f.Add([]byte(s), "r/1")
	}
	f.Fuzz(func(t *testing.T, msg []byte, resource string) {
		e := delivery.Event{EventType: "fuzz.e", Message: msg, ResourceID: resource}
		if err := e.Validate(); err != nil {
			if herr.CodeOf(err) != herr.InvalidArgument {
				t.Fatalf("code %v", herr.CodeOf(err))
			}
			return
		}
		if len(msg) > 0 {
			if !utf8.Valid(msg) {
				t.Fatalf("accepted invalid UTF-8")
			}
			var m map[string]any
			if err := json.Unmarshal(msg, &m); err != nil {
				t.Fatalf("accepted %q: %v", msg, err)
			}
		}
		if !utf8.ValidString(resource) {
			t.Fatalf("accepted an invalid resource id")
		}
	})
}

// FuzzCheckText: what passes has no control character and is UTF-8.
func FuzzCheckText(f *testing.F) {
	for _, s := range []string{"worker-1", "w\x00", "w\u0085", "\xff", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if delivery.CheckText("workerId", s) != nil {
			return
		}
		if !utf8.ValidString(s) || strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || (r >= 0x7f && r <= 0x9f) }) {
			t.Fatalf("accepted %q", s)
		}
	})
}

// FuzzParseStored: every body parseStored reads, the lenient decoder
// reads alike.
func FuzzParseStored(f *testing.F) {
	for _, s := range []string{
		`{"specversion":"1.0","id":"x","source":"/herald","type":"a.b","subject":"/r","datacontenttype":"application/json","time":"2024-10-16T14:30:00Z","data":{"k":[1,"é"]},"principalidentity":"p","publishedat":"2024-10-16T14:30:01Z","traceparent":"00-1-2-01"}`,
		`{"type":"a","type":"b","data":{}}`, `{"type":"a","data":{"x":1,"x":2}}`, `{"type":"a\u0062","data":{}}`, `{"type":"a","data":null}`, `{"data":{}}`, `{"type":"a"} `,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fast, ok := delivery.ParseStored(body)
		if !ok {
			return
		}
		var want delivery.StoredEvent
		require.NoError(t, delivery.DecodeStoredLenient(body, &want), "%q", body)
		require.Equal(t, want.Type, fast.Type)
		require.Equal(t, want.Subject, fast.Subject)
		require.Equal(t, want.Time, fast.Time)
		require.Equal(t, want.PublishedAt, fast.PublishedAt)
		require.Equal(t, want.PrincipalIdentity, fast.PrincipalIdentity)
		require.Equal(t, string(want.Data), string(fast.Data))
	})
}
