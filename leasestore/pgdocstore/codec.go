package pgdocstore

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"gocloud.dev/docstore/driver"
	"gocloud.dev/gcerrors"
)

// A document travels in two forms. The value tree is what docstore's
// encoder produces and its decoder reads: nil, bool, string, int64, uint64
// (only above math.MaxInt64), float64, []byte, time.Time, []any and
// map[string]any. The stored form is JSON text that PostgreSQL keeps as
// JSONB. JSON has no bytes, times or integer/float distinction, so:
//
//   - an integer is written without a fraction ("3"), a finite float always
//     with one ("3.0", "0.25"); PostgreSQL's numeric keeps the text's digits
//     and never prints an exponent, so the two stay apart on the way back;
//   - bytes, times, non-finite floats and strings JSONB cannot hold (NUL, or
//     invalid UTF-8) become one-member objects tagged "$bytes", "$time",
//     "$float" and "$str";
//   - a map key that starts with '$' gets one more '$', so no user map is
//     read back as a tag.
//
// Times are written in UTC with nine fraction digits, a fixed width, so
// their text sorts as the times do (years 0 to 9999).

// Tags of values JSON cannot hold as themselves.
const (
	tagBytes  = "$bytes"
	tagTime   = "$time"
	tagFloat  = "$float"
	tagString = "$str"
)

// timeLayout is the fixed-width UTC layout of stored times.
const timeLayout = "2006-01-02T15:04:05.000000000Z"

var typeOfTime = reflect.TypeFor[time.Time]()

// encodeDoc encodes doc as a value tree (a map).
func encodeDoc(doc driver.Document) (map[string]any, error) {
	var e encoder
	if err := doc.Encode(&e); err != nil {
		return nil, err
	}
	m, ok := e.val.(map[string]any)
	if !ok {
		return nil, errorf(gcerrors.InvalidArgument, nil, "pgdocstore: document encodes as %T, not a map", e.val)
	}
	return m, nil
}

// encodeValue encodes one Go value (a Mod's value) as a value tree.
func encodeValue(v any) (any, error) {
	var e encoder
	if err := driver.Encode(reflect.ValueOf(v), &e); err != nil {
		return nil, err
	}
	return e.val, nil
}

// encoder builds a value tree; it implements driver.Encoder.
type encoder struct{ val any }

func (e *encoder) EncodeNil()            { e.val = nil }
func (e *encoder) EncodeBool(x bool)     { e.val = x }
func (e *encoder) EncodeInt(x int64)     { e.val = x }
func (e *encoder) EncodeFloat(x float64) { e.val = x }
func (e *encoder) EncodeString(x string) { e.val = x }
func (e *encoder) EncodeBytes(x []byte)  { e.val = slices.Clone(x) }
func (e *encoder) ListIndex(int)         { panic("pgdocstore: ListIndex on a scalar encoder") }
func (e *encoder) MapKey(string)         { panic("pgdocstore: MapKey on a scalar encoder") }

func (e *encoder) EncodeUint(x uint64) {
	if x <= math.MaxInt64 {
		e.val = int64(x)
		return
	}
	e.val = x
}

func (e *encoder) EncodeSpecial(v reflect.Value) (bool, error) {
	if v.Type() == typeOfTime {
		e.val = v.Interface()
		return true, nil
	}
	return false, nil
}

func (e *encoder) EncodeList(n int) driver.Encoder {
	s := make([]any, n)
	e.val = s
	return &listEncoder{s: s}
}

func (e *encoder) EncodeMap(n int) driver.Encoder {
	m := make(map[string]any, n)
	e.val = m
	return &mapEncoder{m: m}
}

type listEncoder struct {
	encoder
	s []any
}

func (e *listEncoder) ListIndex(i int) { e.s[i] = e.val }

type mapEncoder struct {
	encoder
	m map[string]any
}

func (e *mapEncoder) MapKey(k string) { e.m[k] = e.val }

// decoder reads a value tree; it implements driver.Decoder.
type decoder struct{ val any }

func (d decoder) String() string { return fmt.Sprint(d.val) }
func (d decoder) AsNull() bool   { return d.val == nil }

func (d decoder) AsBool() (bool, bool) {
	b, ok := d.val.(bool)
	return b, ok
}

func (d decoder) AsString() (string, bool) {
	s, ok := d.val.(string)
	return s, ok
}

func (d decoder) AsInt() (int64, bool) {
	i, ok := d.val.(int64)
	return i, ok
}

func (d decoder) AsUint() (uint64, bool) {
	switch v := d.val.(type) {
	case int64:
		return uint64(v), v >= 0
	case uint64:
		return v, true
	}
	return 0, false
}

func (d decoder) AsFloat() (float64, bool) {
	f, ok := d.val.(float64)
	return f, ok
}

func (d decoder) AsBytes() ([]byte, bool) {
	b, ok := d.val.([]byte)
	return b, ok
}

func (d decoder) AsInterface() (any, error) { return d.val, nil }

func (d decoder) ListLen() (int, bool) {
	s, ok := d.val.([]any)
	return len(s), ok
}

func (d decoder) DecodeList(f func(int, driver.Decoder) bool) {
	for i, e := range d.val.([]any) {
		if !f(i, decoder{e}) {
			return
		}
	}
}

func (d decoder) MapLen() (int, bool) {
	m, ok := d.val.(map[string]any)
	return len(m), ok
}

func (d decoder) DecodeMap(f func(string, driver.Decoder, bool) bool) {
	for k, v := range d.val.(map[string]any) {
		if !f(k, decoder{v}, true) {
			return
		}
	}
}

func (d decoder) AsSpecial(v reflect.Value) (bool, any, error) {
	if v.Type() != typeOfTime {
		return false, nil, nil
	}
	if t, ok := d.val.(time.Time); ok {
		return true, t, nil
	}
	return true, nil, fmt.Errorf("pgdocstore: cannot decode %T as a time", d.val)
}

// marshal writes a value tree as the stored JSON text.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	if err := writeJSON(&b, v); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

func writeJSON(b *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case nil:
		b.WriteString("null")
	case bool:
		b.WriteString(strconv.FormatBool(v))
	case int64:
		b.WriteString(strconv.FormatInt(v, 10))
	case uint64:
		b.WriteString(strconv.FormatUint(v, 10))
	case float64:
		if math.IsNaN(v) || math.IsInf(v, 0) {
			writeTagged(b, tagFloat, strconv.FormatFloat(v, 'g', -1, 64))
			return nil
		}
		s := strconv.FormatFloat(v, 'f', -1, 64)
		b.WriteString(s)
		if !strings.ContainsRune(s, '.') {
			b.WriteString(".0")
		}
	case string:
		if storable(v) {
			writeString(b, v)
		} else {
			writeTagged(b, tagString, base64.StdEncoding.EncodeToString([]byte(v)))
		}
	case []byte:
		writeTagged(b, tagBytes, base64.StdEncoding.EncodeToString(v))
	case time.Time:
		u := v.UTC()
		if u.Year() < 0 || u.Year() > 9999 {
			return errorf(gcerrors.InvalidArgument, nil, "pgdocstore: time %v is outside years 0 to 9999", v)
		}
		writeTagged(b, tagTime, u.Format(timeLayout))
	case []any:
		b.WriteByte('[')
		for i, e := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := writeJSON(b, e); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	case map[string]any:
		b.WriteByte('{')
		first := true
		for k, e := range v {
			if !storable(k) {
				return errorf(gcerrors.InvalidArgument, nil, "pgdocstore: map key %q holds a NUL or invalid UTF-8", k)
			}
			if !first {
				b.WriteByte(',')
			}
			first = false
			writeString(b, escapeKey(k))
			b.WriteByte(':')
			if err := writeJSON(b, e); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	default:
		return errorf(gcerrors.Internal, nil, "pgdocstore: cannot store a %T", v)
	}
	return nil
}

func writeTagged(b *bytes.Buffer, tag, s string) {
	b.WriteByte('{')
	writeString(b, tag)
	b.WriteByte(':')
	writeString(b, s)
	b.WriteByte('}')
}

// storable reports whether JSONB can hold s as a string: valid UTF-8
// without NUL (PostgreSQL's text types have no NUL).
func storable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// writeString writes s, valid UTF-8, as a JSON string.
func writeString(b *bytes.Buffer, s string) {
	const hex = "0123456789abcdef"
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c < 0x20:
			b.WriteString(`\u00`)
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
}

// escapeKey and unescapeKey keep user keys apart from tags.
func escapeKey(k string) string {
	if strings.HasPrefix(k, "$") {
		return "$" + k
	}
	return k
}

func unescapeKey(k string) string {
	if strings.HasPrefix(k, "$$") {
		return k[1:]
	}
	return k
}

// unmarshal reads stored JSON text back into a value tree.
func unmarshal(data []byte) (any, error) {
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var raw any
	if err := d.Decode(&raw); err != nil {
		return nil, errorf(gcerrors.Internal, err, "pgdocstore: stored document is not JSON")
	}
	return fromJSON(raw)
}

func fromJSON(v any) (any, error) {
	switch v := v.(type) {
	case nil, bool, string:
		return v, nil
	case json.Number:
		s := string(v)
		if !strings.ContainsAny(s, ".eE") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return i, nil
			}
			if u, err := strconv.ParseUint(s, 10, 64); err == nil {
				return u, nil
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, errorf(gcerrors.Internal, err, "pgdocstore: stored number %s", s)
		}
		return f, nil
	case []any:
		out := make([]any, len(v))
		for i, e := range v {
			var err error
			if out[i], err = fromJSON(e); err != nil {
				return nil, err
			}
		}
		return out, nil
	case map[string]any:
		if len(v) == 1 {
			for k, e := range v {
				if s, ok := e.(string); ok {
					if val, tagged, err := fromTag(k, s); tagged {
						return val, err
					}
				}
			}
		}
		out := make(map[string]any, len(v))
		for k, e := range v {
			val, err := fromJSON(e)
			if err != nil {
				return nil, err
			}
			out[unescapeKey(k)] = val
		}
		return out, nil
	}
	return nil, errorf(gcerrors.Internal, nil, "pgdocstore: unexpected JSON value %T", v)
}

// fromTag decodes a tagged value; tagged is false when k is no tag.
func fromTag(k, s string) (val any, tagged bool, err error) {
	switch k {
	case tagBytes:
		b, err := base64.StdEncoding.DecodeString(s)
		return b, true, err
	case tagString:
		b, err := base64.StdEncoding.DecodeString(s)
		return string(b), true, err
	case tagTime:
		t, err := time.Parse(timeLayout, s)
		return t, true, err
	case tagFloat:
		f, err := strconv.ParseFloat(s, 64)
		return f, true, err
	}
	return nil, false, nil
}

// project returns a copy of tree holding only the values at fps (all of
// tree when fps is empty). A missing path is skipped.
func project(tree map[string]any, fps [][]string) map[string]any {
	if len(fps) == 0 {
		return tree
	}
	out := map[string]any{}
	for _, fp := range fps {
		v, ok := lookup(tree, fp)
		if !ok {
			continue
		}
		m := out
		for _, k := range fp[:len(fp)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		m[fp[len(fp)-1]] = v
	}
	return out
}

// lookup returns the value of tree at fp.
func lookup(tree map[string]any, fp []string) (any, bool) {
	var cur any = tree
	for _, k := range fp {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// applyMods applies docstore Update modifications to tree: a nil value
// deletes the field, an IncOp adds to a number (a missing field counts as
// zero), anything else sets the field, making intermediate maps. It checks
// every mod before changing anything.
func applyMods(tree map[string]any, mods []driver.Mod) error {
	type change struct {
		fp  []string
		val any
		del bool
	}
	changes := make([]change, 0, len(mods))
	for _, m := range mods {
		c := change{fp: m.FieldPath}
		switch v := m.Value.(type) {
		case nil:
			c.del = true
		case driver.IncOp:
			amount, err := encodeValue(v.Amount)
			if err != nil {
				return err
			}
			cur, _ := lookup(tree, m.FieldPath)
			if c.val, err = add(cur, amount); err != nil {
				return err
			}
		default:
			val, err := encodeValue(v)
			if err != nil {
				return err
			}
			c.val = val
		}
		// A non-map along the path is refused before anything changes.
		var cur any = tree
		for _, k := range m.FieldPath[:len(m.FieldPath)-1] {
			mm, ok := cur.(map[string]any)
			if !ok {
				return errorf(gcerrors.InvalidArgument, nil, "pgdocstore: field path %q crosses a non-map", strings.Join(m.FieldPath, "."))
			}
			if cur = mm[k]; cur == nil {
				break
			}
		}
		if _, ok := cur.(map[string]any); cur != nil && !ok {
			return errorf(gcerrors.InvalidArgument, nil, "pgdocstore: field path %q crosses a non-map", strings.Join(m.FieldPath, "."))
		}
		changes = append(changes, c)
	}
	for _, c := range changes {
		m := tree
		for _, k := range c.fp[:len(c.fp)-1] {
			next, ok := m[k].(map[string]any)
			if !ok {
				if c.del {
					m = nil
					break
				}
				next = map[string]any{}
				m[k] = next
			}
			m = next
		}
		last := c.fp[len(c.fp)-1]
		switch {
		case m == nil:
		case c.del:
			delete(m, last)
		default:
			m[last] = c.val
		}
	}
	return nil
}

// add adds two encoded numbers; an int and a float make a float.
func add(x, y any) (any, error) {
	if x == nil {
		return y, nil
	}
	toFloat := func(v any) (float64, bool) {
		switch v := v.(type) {
		case int64:
			return float64(v), true
		case uint64:
			return float64(v), true
		case float64:
			return v, true
		}
		return 0, false
	}
	if xi, ok := x.(int64); ok {
		if yi, ok := y.(int64); ok {
			return xi + yi, nil
		}
	}
	xf, ok := toFloat(x)
	if !ok {
		return nil, errorf(gcerrors.InvalidArgument, nil, "pgdocstore: cannot increment a %T", x)
	}
	yf, ok := toFloat(y)
	if !ok {
		return nil, errorf(gcerrors.InvalidArgument, nil, "pgdocstore: cannot increment by a %T", y)
	}
	return xf + yf, nil
}
