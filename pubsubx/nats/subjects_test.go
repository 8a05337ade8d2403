package nats

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/filter"
	"github.com/heraldevents/herald/herr"
)

func TestEncodeToken(t *testing.T) {
	for in, want := range map[string]string{
		"":              "~",
		"users":         "users",
		"order.created": "order%2Ecreated",
		"a b":           "a%20b",
		"*>":            "%2A%3E",
		"~":             "%7E",
		"%":             "%25",
		"ü":             "%C3%BC",
		"A-z_0":         "A-z_0",
	} {
		require.Equal(t, want, encodeToken(in), "encodeToken(%q)", in)
	}
}

func TestMessageSubject(t *testing.T) {
	s := newSubjects("herald.prod")
	for _, tc := range []struct{ typ, id, want string }{
		{"order.created", "", "herald.prod.order%2Ecreated.~"},
		{"t", "/", "herald.prod.t.~.~"},
		{"t", "/a", "herald.prod.t.~.a"},
		{"t", "/a/", "herald.prod.t.~.a.~"},
		{"t", "a", "herald.prod.t.a"},
		{"t", "a//b", "herald.prod.t.a.~.b"},
		{"", "/a", "herald.prod.~.~.a"},
	} {
		require.Equal(t, tc.want, s.message(tc.typ, tc.id), "%q %q", tc.typ, tc.id)
	}
	long := "/" + strings.Repeat("路径/", 400)
	subj := s.message("t", long)
	require.Less(t, len(subj), 3000, "subjects stay within NATS's protocol line")
	require.True(t, strings.HasSuffix(subj, "."+truncToken), "a cut subject ends in the cut token")
}

func patternStrings(s subjects, groups filter.Groups) []string {
	return subjectStrings(s.patterns(groups))
}

func eq(id string) filter.ResourceFilter {
	return filter.ResourceFilter{FilterType: filter.Eq, ResourceID: id}
}
func greedy(id string) filter.ResourceFilter {
	return filter.ResourceFilter{FilterType: filter.StartsWithGreedy, ResourceID: id}
}
func lazy(id string) filter.ResourceFilter {
	return filter.ResourceFilter{FilterType: filter.StartsWithLazy, ResourceID: id}
}

func TestPatterns(t *testing.T) {
	s := newSubjects("p")
	for _, tc := range []struct {
		name   string
		groups filter.Groups
		want   []string
	}{
		{"no groups", nil, []string{"p.>"}},
		{"type only", filter.Groups{{EventType: "a.b"}}, []string{"p.a%2Eb.>"}},
		{"eq", filter.Groups{{EventType: "t", Filters: []filter.ResourceFilter{eq("/users/7")}}}, []string{"p.t.~.users.7"}},
		{"greedy at a boundary", filter.Groups{{EventType: "t", Filters: []filter.ResourceFilter{greedy("/users/")}}}, []string{"p.t.~.users.>"}},
		{"greedy partial piece", filter.Groups{{EventType: "t", Filters: []filter.ResourceFilter{greedy("/users/7")}}}, []string{"p.t.~.users.>"}},
		{"greedy empty", filter.Groups{{EventType: "t", Filters: []filter.ResourceFilter{greedy("")}}}, []string{"p.t.>"}},
		{"lazy at a boundary", filter.Groups{{EventType: "t", Filters: []filter.ResourceFilter{lazy("/users/")}}},
			[]string{"p.t.~.users.*", "p.t.~.users.*.*", "p.t.~.users.*.*.*"}},
		{"lazy partial piece", filter.Groups{{EventType: "t", Filters: []filter.ResourceFilter{lazy("/users")}}}, []string{"p.t.~.>"}},
		{"covered filters merge", filter.Groups{{EventType: "t", Filters: []filter.ResourceFilter{eq("/users/7"), greedy("/users/"), lazy("/users/")}}},
			[]string{"p.t.~.users.>"}},
		{"type-only group covers its filters", filter.Groups{
			{EventType: "t", Filters: []filter.ResourceFilter{eq("/a")}},
			{EventType: "t"},
			{EventType: "u", Filters: []filter.ResourceFilter{eq("/a")}},
		}, []string{"p.t.>", "p.u.~.a"}},
		{"overlap without cover joins", filter.Groups{{EventType: "t", Filters: []filter.ResourceFilter{lazy("/a/"), greedy("/a/b/")}}},
			[]string{"p.t.~.a.>"}},
	} {
		require.ElementsMatch(t, tc.want, patternStrings(s, tc.groups), tc.name)
	}
}

// corpus are event types and resource ids with the corners of the notifications API's
// filters, and ids long enough to be cut.
var (
	corpusTypes = []string{"order.created", "order.created.v2", "order", "user.deleted"}
	corpusIDs   = []string{
		"", "/", "//", "/users", "/users/", "/users/7", "/users/7/", "/users/7/photos", "/users/70",
		"/usersx/1", "users/7", "users", "a", "a/", "/a/", "/a//", "//a", "/users//7", "/users//7/",
		"/ünïcode/路径", "/a b/c?d=e&f#g%20+*>.~'\"<tag>\\end/",
		"/" + strings.Repeat("路径/", 140) + "x",
		"/" + strings.Repeat("路径/", 140) + "x/y",
		"/" + strings.Repeat("x", 1000) + "/" + strings.Repeat("y", 1000),
		strings.Repeat("%", 900) + "/z",
	}
	corpusPrefixes = []string{
		"", "/", "/users", "/users/", "/users/7", "/users/7/", "users", "users/", "/ünïcode/", "/a/", "/a", "//",
		"/" + strings.Repeat("路径/", 140), "/" + strings.Repeat("路径/", 75), "/" + strings.Repeat("x", 1000) + "/",
		strings.Repeat("%", 900) + "/",
	}
)

// TestPatternsNeverFilterTooMuch: for every filter the corpus can build,
// every event filter.Match accepts lands on a subject the patterns match,
// on servers with filter lists and on servers with one filter subject; and
// the lists never overlap (JetStream refuses that).
func TestPatternsNeverFilterTooMuch(t *testing.T) {
	s := newSubjects("herald.prod")
	var cases []filter.Groups
	for _, typ := range corpusTypes[:2] {
		cases = append(cases, filter.Groups{{EventType: typ}})
		for _, p := range corpusPrefixes {
			cases = append(cases,
				filter.Groups{{EventType: typ, Filters: []filter.ResourceFilter{greedy(p)}}},
				filter.Groups{{EventType: typ, Filters: []filter.ResourceFilter{lazy(p)}}},
			)
			if p != "" {
				cases = append(cases, filter.Groups{{EventType: typ, Filters: []filter.ResourceFilter{eq(p)}}})
			}
		}
	}
	// Mixed groups: every filter type on shared prefixes, two types.
	var mixed []filter.ResourceFilter
	for _, p := range corpusPrefixes[:10] {
		mixed = append(mixed, lazy(p), greedy(p+"x"))
	}
	cases = append(cases, filter.Groups{
		{EventType: "order.created", Filters: mixed[:filter.MaxFiltersPerGroup]},
		{EventType: "user.deleted", Filters: []filter.ResourceFilter{eq("/a"), lazy("")}},
	})

	for _, groups := range cases {
		require.NoError(t, groups.Validate("groups"))
		ps := s.patterns(groups)
		for i := range ps {
			for j := range ps {
				if i != j {
					require.False(t, collide(ps[i], ps[j]), "overlapping filters %v for %+v", subjectStrings(ps), groups)
				}
			}
		}
		single := joinAll(ps)
		for _, typ := range corpusTypes {
			for _, id := range corpusIDs {
				if !groups.Match(typ, id) {
					continue
				}
				subj := s.messageTokens(typ, id)
				matched := false
				for _, p := range ps {
					matched = matched || covers(p, subj)
				}
				require.True(t, matched, "groups %+v: %q %q (subject %s) matches, but no filter subject %v does", groups, typ, id, strings.Join(subj, "."), subjectStrings(ps))
				require.True(t, covers(single, subj), "joined filter %s misses %s", strings.Join(single, "."), strings.Join(subj, "."))
			}
		}
	}
}

func TestNormalizeAndJoin(t *testing.T) {
	tok := func(ss ...string) [][]string { return tokensOf(ss) }
	require.Equal(t, []string{"p.t.>"}, subjectStrings(normalize(tok("p.t.a", "p.t.>", "p.t.a"))))
	require.ElementsMatch(t, []string{"p.t.a", "p.u.a"}, subjectStrings(normalize(tok("p.t.a", "p.u.a", "p.t.a"))))
	require.Equal(t, []string{"p.t.>"}, subjectStrings(normalize(tok("p.t.*.b", "p.t.a.*"))))
	// A join leaves every pattern at least one token under '>'.
	require.Equal(t, "p.t.>", strings.Join(joinAll(tok("p.t.a", "p.t.a.b")), "."))
	require.Equal(t, "p.>", strings.Join(joinAll(tok("p.t.a", "p.u.a")), "."))
	require.Equal(t, "p.t.a", strings.Join(joinAll(tok("p.t.a")), "."))
}

func TestConsumerName(t *testing.T) {
	require.Equal(t, "herald-dc-0b6f", consumerName("herald-dc-0b6f"))
	for _, name := range []string{"herald-q-my.app.queue", "herald-q-" + strings.Repeat("a", 200), "a b", "x*", "~"} {
		c := consumerName(name)
		require.Equal(t, c, consumerName(name), "deterministic")
		require.False(t, strings.ContainsAny(c, ".*> /\\\t\r\n"), "valid JetStream name: %q", c)
		require.LessOrEqual(t, len(c), 65)
		require.Contains(t, c, "~", "hashed names are marked")
	}
	require.NotEqual(t, consumerName("herald-q-a.b"), consumerName("herald-q-a_b"))
}

func TestHeaderValues(t *testing.T) {
	for _, v := range []string{"", "plain", " lead", "trail ", "a\r\nb", "100%", "%41", "ünï 路径", "\x00\x7f", "tab\tx"} {
		require.Equal(t, v, unescapeValue(escapeValue(v)), "%q", v)
		require.False(t, strings.ContainsAny(escapeValue(v), " \r\n\t"), "%q", v)
	}
	require.Equal(t, "/users/7", escapeValue("/users/7"), "common values stay readable")
	require.Equal(t, "50%zz", unescapeValue("50%zz"), "a foreign '%' is kept")
	md := map[string]string{"event_type": "a.b", "Resource_ID": " x "}
	h, err := headersOf(md)
	require.NoError(t, err)
	h.Set("Nats-Expected-Stream", "S")
	require.Equal(t, md, metadataOf(h))
	for _, k := range []string{"", "a:b", "a b", "Nats-Msg-Id", "nats-x", "é"} {
		_, err := headersOf(map[string]string{k: "v"})
		require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "key %q", k)
	}
}

func TestParseAck(t *testing.T) {
	h, err := parseAck("$JS.ACK.S.c1.1.42.7.1796021118152610296.2")
	require.NoError(t, err)
	require.Equal(t, handle{reply: "$JS.ACK.S.c1.1.42.7.1796021118152610296.2", stream: "S", consumer: "c1", seq: 42}, *h)
	h, err = parseAck("$JS.ACK.dom.ACCHASH.S.c1.1.43.7.1796021118152610296.2.tok")
	require.NoError(t, err)
	require.Equal(t, "S", h.stream)
	require.Equal(t, uint64(43), h.seq)
	for _, bad := range []string{"", "_INBOX.x", "$JS.ACK", "$JS.ACK.", "$JS.ACK.S.c1.1.2.3.4", "$JS.ACK.S.c1.1.x.7.1.2",
		"$JS.ACK.S.c1.1.2.3.4.5.6", "$JS.ACK.S.c1.1.2.3.4.5.6.7", "$JS.ACKS.c1.1.42.7.1.2", "$JS.ACK.dom.H.S.c1.1.-1.7.1.2.tok"} {
		_, err := parseAck(bad)
		require.Equal(t, herr.InvalidArgument, herr.CodeOf(err), "%q", bad)
	}
	require.Equal(t, 0.0, testing.AllocsPerRun(100, func() {
		_, _ = parseAck("$JS.ACK.S.c1.1.42.7.1796021118152610296.2")
	})-1, "allocations besides the handle")
}

// FuzzParseAck: parseAck agrees with splitting the subject on '.'.
func FuzzParseAck(f *testing.F) {
	f.Add("$JS.ACK.S.c1.1.42.7.1796021118152610296.2")
	f.Add("$JS.ACK.dom.ACCHASH.S.c1.1.43.7.1796021118152610296.2.tok")
	f.Add("$JS.ACK.S.c1.1.2.3.4.5.6")
	f.Fuzz(func(t *testing.T, reply string) {
		h, err := parseAck(reply)
		toks := strings.Split(reply, ".")
		var want *handle
		var seq string
		switch {
		case len(toks) < 9 || toks[0] != "$JS" || toks[1] != "ACK":
		case len(toks) == 9:
			want, seq = &handle{reply: reply, stream: toks[2], consumer: toks[3]}, toks[5]
		case len(toks) >= 12:
			want, seq = &handle{reply: reply, stream: toks[4], consumer: toks[5]}, toks[7]
		}
		if want != nil {
			n, perr := strconv.ParseUint(seq, 10, 64)
			if perr != nil {
				want = nil
			}
			if want != nil {
				want.seq = n
			}
		}
		if want == nil {
			require.Error(t, err)
			return
		}
		require.NoError(t, err)
		require.Equal(t, *want, *h)
	})
}

func TestVersionAtLeast(t *testing.T) {
	require.True(t, versionAtLeast("2.10.0", 2, 10))
	require.True(t, versionAtLeast("2.15.2", 2, 10))
	require.True(t, versionAtLeast("3.0.0-beta", 2, 10))
	require.False(t, versionAtLeast("2.9.10", 2, 10))
	require.False(t, versionAtLeast("", 2, 10))
}

func TestCodeOf(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want herr.Code
	}{
		{jetstream.ErrConsumerNotFound, herr.NotFound},
		{jetstream.ErrStreamNotFound, herr.NotFound},
		{fmt.Errorf("x: %w", jetstream.ErrConsumerExists), herr.AlreadyExists},
		{&jetstream.APIError{Code: 404, ErrorCode: jetstream.JSErrCodeConsumerNotFound}, herr.NotFound},
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeConsumerNameExists}, herr.AlreadyExists},
		{&jetstream.APIError{Code: 503, ErrorCode: 1}, herr.Unavailable},
		{natsgo.ErrConnectionClosed, herr.Unavailable},
		{natsgo.ErrNoServers, herr.Unavailable},
		{natsgo.ErrTimeout, herr.Unavailable},
		{natsgo.ErrReconnectBufExceeded, herr.Unavailable},
		{natsgo.ErrMaxPayload, herr.InvalidArgument},
		{context.Canceled, herr.Canceled},
		{context.DeadlineExceeded, herr.DeadlineExceeded},
		{errors.New("odd"), herr.Unknown},
	} {
		require.Equal(t, tc.want.String(), codeOf(tc.err).String(), "%v", tc.err)
	}
	require.Equal(t, herr.Unavailable, herr.CodeOf(wrap(errors.New("odd"), "op")), "nothing leaves uncoded")
}
