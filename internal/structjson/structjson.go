// Package structjson turns a JSON object into a google.protobuf.Struct,
// the form the notifications API's gRPC Event carries its message in.
//
// It gives what protojson.Unmarshal gives, in about a third of the time
// and allocations: every gRPC delivery converts one event's message, and
// protojson's general decoder was a tenth of a gRPC stream's CPU. The
// fast path reads the object with jsontext; an input it does not take as
// it is (bad JSON, a repeated member, invalid UTF-8, a number out of
// float64's range) goes to protojson itself, so errors and edge cases are
// protojson's own. TestDecodeMatchesProtojson and FuzzDecodeMatchesProtojson
// hold the two equal.
package structjson

import (
	"bytes"
	"errors"
	"io"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"
)

// maxDepth bounds the fast path's recursion; deeper input goes to
// protojson, which has its own limit. Herald's messages are at most 32
// deep (delivery.MaxMessageDepth).
const maxDepth = 64

var errSlow = errors.New("structjson: not on the fast path")

// Decode returns the Struct of the JSON object b, or protojson's error for
// b when it is not one.
func Decode(b []byte) (*structpb.Struct, error) {
	if s, err := decodeFast(b); err == nil {
		return s, nil
	}
	s := &structpb.Struct{}
	if err := protojson.Unmarshal(b, s); err != nil {
		return nil, err
	}
	return s, nil
}

// decodeFast is Decode for the input it takes; any other is an error.
func decodeFast(b []byte) (*structpb.Struct, error) {
	d := jsontext.NewDecoder(bytes.NewReader(b))
	t, err := d.ReadToken()
	if err != nil || t.Kind() != '{' {
		return nil, errSlow
	}
	s, err := readStruct(d, 1)
	if err != nil {
		return nil, err
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return nil, errSlow // more after the object
	}
	return s, nil
}

// readStruct reads an object's members and its closing brace.
func readStruct(d *jsontext.Decoder, depth int) (*structpb.Struct, error) {
	if depth > maxDepth {
		return nil, errSlow
	}
	s := &structpb.Struct{Fields: map[string]*structpb.Value{}}
	for d.PeekKind() == '"' {
		t, err := d.ReadToken()
		if err != nil {
			return nil, errSlow
		}
		name := t.String()
		v, err := readValue(d, depth)
		if err != nil {
			return nil, err
		}
		s.Fields[name] = v
	}
	if t, err := d.ReadToken(); err != nil || t.Kind() != '}' {
		return nil, errSlow
	}
	return s, nil
}

// readValue reads one value.
func readValue(d *jsontext.Decoder, depth int) (*structpb.Value, error) {
	switch d.PeekKind() {
	case '{':
		if _, err := d.ReadToken(); err != nil {
			return nil, errSlow
		}
		s, err := readStruct(d, depth+1)
		if err != nil {
			return nil, err
		}
		return structpb.NewStructValue(s), nil
	case '[':
		if _, err := d.ReadToken(); err != nil || depth+1 > maxDepth {
			return nil, errSlow
		}
		l := &structpb.ListValue{}
		for d.PeekKind() != ']' {
			if d.PeekKind() == 0 {
				return nil, errSlow
			}
			v, err := readValue(d, depth+1)
			if err != nil {
				return nil, err
			}
			l.Values = append(l.Values, v)
		}
		if _, err := d.ReadToken(); err != nil {
			return nil, errSlow
		}
		return structpb.NewListValue(l), nil
	case '"':
		t, err := d.ReadToken()
		if err != nil {
			return nil, errSlow
		}
		return structpb.NewStringValue(t.String()), nil
	case '0':
		raw, err := d.ReadValue()
		if err != nil {
			return nil, errSlow
		}
		f, err := strconv.ParseFloat(string(raw), 64)
		if err != nil {
			return nil, errSlow // out of range: protojson says what
		}
		return structpb.NewNumberValue(f), nil
	case 't', 'f':
		t, err := d.ReadToken()
		if err != nil {
			return nil, errSlow
		}
		return structpb.NewBoolValue(t.Bool()), nil
	case 'n':
		if _, err := d.ReadToken(); err != nil {
			return nil, errSlow
		}
		return structpb.NewNullValue(), nil
	}
	return nil, errSlow
}
