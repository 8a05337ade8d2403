// Package strictjson decodes the JSON Herald takes from outside (REST
// bodies, WebSocket frames, filter groups in a query string) by one set of
// strict rules, and scans event messages for what would break a consumer:
//
//   - member names match a struct field's JSON name exactly (not case-
//     insensitively, as encoding/json does);
//   - a member no field declares is refused: `unknown field "delay"`
//     (unless IgnoreUnknown);
//   - a member name repeated in one object is refused (RFC 8259 §4 leaves
//     its meaning open; RFC 7493, I-JSON, forbids it);
//   - strings are valid UTF-8 (RFC 8259 §8.1), escapes included: a lone
//     surrogate such as "\ud800" is refused too.
//
// Decoding is github.com/go-json-experiment/json (the proposed
// encoding/json/v2), whose defaults are these rules. Errors are herr-coded
// and caller-safe: herr.Malformed (HTTP 400) for syntax, shape, unknown and
// repeated members; herr.InvalidArgument (422) for invalid UTF-8, a
// well-formed request that breaks a rule; a member's own decoder's herr
// error (a filter_type, say) as it is. Messages name the member by its JSON
// pointer (RFC 6901) and never quote a value.
package strictjson

import (
	"bytes"
	"errors"
	"io"
	"reflect"
	"strconv"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/heraldevents/herald/herr"
)

// maxNameInMessage bounds how much of a client's member name an error
// quotes back.
const maxNameInMessage = 100

// Option changes a rule of Unmarshal.
type Option struct{ lenientParts, ignoreUnknown bool }

// IgnoreUnknown lets members no field declares through, unread but still
// held to the rules of the JSON text (UTF-8, no repeated names, syntax),
// for bodies whose published schema allows additional properties: the
// notifications API's publish bodies (see functions/publish). Herald's
// own bodies stay strict.
var IgnoreUnknown = Option{ignoreUnknown: true}

// LenientParts lets invalid UTF-8 and repeated member names through below
// the top level, for an envelope whose parts are decoded again, each by
// the strict rules: in a publish batch, one event's invalid UTF-8 or
// repeated member fails that event alone. The top-level object's own
// member names must still be unique.
var LenientParts = Option{lenientParts: true}

// Unmarshal decodes data, which must be exactly one JSON value, into v (a
// pointer) by the package's rules.
func Unmarshal(data []byte, v any, opts ...Option) error {
	reject := true
	for _, opt := range opts {
		reject = reject && !opt.ignoreUnknown
	}
	o := []jsonv2.Options{jsonv2.RejectUnknownMembers(reject)}
	for _, opt := range opts {
		if opt.lenientParts {
			if err := topLevelNamesUnique(data); err != nil {
				return err
			}
			o = append(o, jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
		}
	}
	if err := jsonv2.Unmarshal(data, v, o...); err != nil {
		return Error(err)
	}
	return nil
}

// topLevelNamesUnique returns a duplicate-field error when data is an
// object that repeats one of its own member names; anything else (not an
// object, bad JSON) is left to the decoder that follows.
func topLevelNamesUnique(data []byte) error {
	d := jsontext.NewDecoder(bytes.NewReader(data), jsontext.AllowInvalidUTF8(true), jsontext.AllowDuplicateNames(true))
	if t, err := d.ReadToken(); err != nil || t.Kind() != '{' {
		return nil
	}
	seen := map[string]bool{}
	for d.PeekKind() == '"' {
		t, err := d.ReadToken()
		if err != nil {
			return nil
		}
		name := t.String()
		if seen[name] {
			return herr.New(herr.Malformed, "duplicate field %s", quoteName(name))
		}
		seen[name] = true
		if d.SkipValue() != nil {
			return nil
		}
	}
	return nil
}

// Error turns an error of jsonv2 or jsontext into a caller-safe herr
// error (see the package doc); an herr error inside is returned as it is.
func Error(err error) error {
	var coded *herr.Error
	if errors.As(err, &coded) {
		return coded
	}
	var sem *jsonv2.SemanticError
	var syn *jsontext.SyntacticError
	switch {
	case errors.As(err, &sem) && errors.Is(sem.Err, jsonv2.ErrUnknownName):
		return herr.New(herr.Malformed, "unknown field %s%s", quoteName(sem.JSONPointer.LastToken()), where(sem.JSONPointer.Parent()))
	case errors.As(err, &syn) && errors.Is(syn.Err, jsontext.ErrDuplicateName):
		return herr.New(herr.Malformed, "duplicate field %s%s", quoteName(syn.JSONPointer.LastToken()), where(syn.JSONPointer.Parent()))
	case errors.As(err, &syn) && invalidUTF8(syn):
		return herr.New(herr.InvalidArgument, "JSON text must be valid UTF-8 (RFC 8259 §8.1): invalid UTF-8 at byte %d%s", syn.ByteOffset, where(syn.JSONPointer))
	case errors.As(err, &syn):
		if errors.Is(syn.Err, io.ErrUnexpectedEOF) {
			return herr.New(herr.Malformed, "request body is not valid JSON: it is empty or cut short")
		}
		return herr.New(herr.Malformed, "request body is not valid JSON: syntax error at byte %d", syn.ByteOffset)
	case errors.As(err, &sem):
		field := string(sem.JSONPointer)
		if field == "" {
			field = "(root)"
		}
		return herr.New(herr.Malformed, "request body is not JSON of the expected shape: %s must be %s", truncate(field), kind(sem.GoType))
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return herr.New(herr.Malformed, "request body is not valid JSON: it is empty or cut short")
	}
	return herr.Wrap(herr.Malformed, err, "request body is not valid JSON of the expected shape")
}

// invalidUTF8 reports a syntactic error about the text's encoding: raw
// bytes that are not UTF-8, or an escape of half a surrogate pair. jsontext
// exports no sentinel for either, so its message is matched (a test holds
// it to that).
func invalidUTF8(e *jsontext.SyntacticError) bool {
	m := e.Err.Error()
	return strings.Contains(m, "UTF-8") || strings.Contains(m, "surrogate")
}

func quoteName(s string) string { return strconv.Quote(truncate(s)) }

func truncate(s string) string {
	if len(s) > maxNameInMessage {
		return s[:maxNameInMessage] + "…"
	}
	return s
}

func where(p jsontext.Pointer) string {
	if p == "" {
		return ""
	}
	return " in " + truncate(string(p))
}

// kind names the JSON value a Go type decodes from, so messages speak
// JSON rather than Go type names.
func kind(t reflect.Type) string {
	if t == nil {
		return "a different JSON value"
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	switch t.Kind() {
	case reflect.Struct, reflect.Map:
		return "a JSON object"
	case reflect.Slice, reflect.Array:
		return "a JSON array"
	case reflect.String:
		return "a JSON string"
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a JSON integer"
	case reflect.Float32, reflect.Float64:
		return "a JSON number"
	}
	return "a different JSON value"
}

// ObjectProblem is what CheckObject found wrong with a JSON object.
type ObjectProblem int

// Problems CheckObject reports.
const (
	NotAnObject ObjectProblem = iota + 1
	InvalidUTF8
	DuplicateName
	TooDeep
	// NumberOutOfRange: a number outside a double's range (see
	// NumberInRange).
	NumberOutOfRange
)

// CheckObject scans data, which must be exactly one JSON object, and
// reports the first problem: not one JSON object (syntax), a string that is
// not valid UTF-8 (escapes included), a member name repeated within one
// object, objects and arrays nested more than maxDepth deep (the
// outermost object is depth 1), or a number outside a double's range
// (NumberInRange). It returns 0 when there is none. It
// allocates little: it is run on every published message.
//
// A message without problems (the common case) is checked in one pass
// (ScanObject); only one with a problem is read token by token to say
// which it is.
func CheckObject(data []byte, maxDepth int) ObjectProblem {
	_, p := CheckObjectScan(data, maxDepth)
	return p
}

// CheckObjectScan is CheckObject, also returning what ScanObject learned
// of a sound object (Scan.Len is then the object's own length, without
// the whitespace around it; Scan.Compact is false when there is any).
func CheckObjectScan(data []byte, maxDepth int) (Scan, ObjectProblem) {
	lead := spaceAt(data, 0)
	if sc, ok := ScanObject(data[lead:], maxDepth); ok && spaceAt(data, lead+sc.Len) == len(data) {
		sc.Compact = sc.Compact && lead == 0 && lead+sc.Len == len(data)
		return sc, 0
	}
	return Scan{}, checkObjectTokens(data, maxDepth)
}

// spaceAt returns the index of the first byte at or after i that is not
// JSON whitespace.
func spaceAt(data []byte, i int) int {
	for i < len(data) && (data[i] == ' ' || data[i] == '\t' || data[i] == '\n' || data[i] == '\r') {
		i++
	}
	return i
}

// checkObjectTokens is CheckObject reading token by token, to name the
// problem.
func checkObjectTokens(data []byte, maxDepth int) ObjectProblem {
	dec := jsontext.NewDecoder(bytes.NewReader(data))
	if dec.PeekKind() != '{' {
		return NotAnObject
	}
	for {
		tok, err := dec.ReadToken()
		if err != nil {
			if err == io.EOF {
				return 0
			}
			var syn *jsontext.SyntacticError
			switch {
			case errors.As(err, &syn) && errors.Is(syn.Err, jsontext.ErrDuplicateName):
				return DuplicateName
			case errors.As(err, &syn) && invalidUTF8(syn):
				return InvalidUTF8
			}
			return NotAnObject
		}
		switch tok.Kind() {
		case '{', '[':
			if dec.StackDepth() > maxDepth {
				return TooDeep
			}
		case '0':
			// String is the number's text, as it was written.
			if !NumberInRange([]byte(tok.String())) {
				return NumberOutOfRange
			}
		}
		if dec.StackDepth() == 0 {
			// The object is closed: anything after it is a second value.
			if _, err := dec.ReadToken(); err != io.EOF {
				return NotAnObject
			}
			return 0
		}
	}
}

// skipString returns the index just past the JSON string that starts with
// the quote at data[i], or len(data) when it is not closed. It jumps from
// quote to quote (bytes.IndexByte) rather than reading byte by byte: most
// of a message's bytes are inside strings.
func skipString(data []byte, i int) int {
	j := i + 1
	for {
		k := bytes.IndexByte(data[j:], '"')
		if k < 0 {
			return len(data)
		}
		j += k
		// The quote ends the string unless an odd number of backslashes
		// escapes it.
		n := 0
		for p := j - 1; p > i && data[p] == '\\'; p-- {
			n++
		}
		if n%2 == 0 {
			return j + 1
		}
		j++
	}
}

// SpaceBetweenTokens reports whether the JSON text data has whitespace
// between its tokens, which json.Compact would remove; whitespace inside
// strings does not count. data must be valid JSON.
func SpaceBetweenTokens(data []byte) bool {
	for i := 0; i < len(data); {
		switch data[i] {
		case '"':
			i = skipString(data, i)
			continue
		case ' ', '\t', '\r', '\n':
			return true
		}
		i++
	}
	return false
}
