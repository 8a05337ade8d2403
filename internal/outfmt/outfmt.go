// Package outfmt writes a command's result in the format its user chose
// with -o: table (the command's own), json, yaml, a Go template
// (template=TPL) or a jq expression (jq=EXPR, run by github.com/itchyny/gojq).
//
// Every format but table sees the result as its JSON form: the same
// member names as -o json, so a template or a jq expression is written
// against what -o json prints. Numbers that are whole are integers (a
// template prints 12, not 1.2e+01).
package outfmt

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"text/template"

	"github.com/itchyny/gojq"
	"go.yaml.in/yaml/v3"
)

// Kinds of format.
const (
	Table    = "table"
	JSON     = "json"
	YAML     = "yaml"
	Template = "template"
	JQ       = "jq"
)

// Usage is the one-line description of the -o values, for help texts.
const Usage = "output format: table, json, yaml, template=GO-TEMPLATE or jq=EXPRESSION"

// Format is a parsed -o value. Its zero value is not usable: use Parse.
type Format struct {
	kind  string
	tmpl  *template.Template
	query *gojq.Code
}

// Parse reads an -o value: "table", "json", "yaml", "template=TPL" or
// "jq=EXPR". An unknown format, a template that does not parse or a jq
// expression that does not compile is an error that says why.
func Parse(spec string) (*Format, error) {
	kind, arg, hasArg := strings.Cut(spec, "=")
	switch kind {
	case Table, JSON, YAML:
		if hasArg {
			return nil, fmt.Errorf("output format %q takes no argument", kind)
		}
		return &Format{kind: kind}, nil
	case Template:
		if strings.TrimSpace(arg) == "" {
			return nil, errors.New("output format template needs a template: -o 'template={{.id}}'")
		}
		t, err := template.New("output").Option("missingkey=zero").Funcs(funcs).Parse(arg)
		if err != nil {
			return nil, fmt.Errorf("the output template does not parse: %w", err)
		}
		return &Format{kind: kind, tmpl: t}, nil
	case JQ:
		if strings.TrimSpace(arg) == "" {
			return nil, errors.New("output format jq needs an expression: -o 'jq=.id'")
		}
		q, err := gojq.Parse(arg)
		if err != nil {
			return nil, fmt.Errorf("the jq expression does not parse: %w", err)
		}
		code, err := gojq.Compile(q)
		if err != nil {
			return nil, fmt.Errorf("the jq expression does not compile: %w", err)
		}
		return &Format{kind: kind, query: code}, nil
	}
	return nil, fmt.Errorf("output format must be table, json, yaml, template=… or jq=…, not %q", spec)
}

// Kind is Table, JSON, YAML, Template or JQ.
func (f *Format) Kind() string { return f.kind }

// IsTable says whether the command prints its own table.
func (f *Format) IsTable() bool { return f.kind == Table }

// funcs are the template functions beyond text/template's own.
var funcs = template.FuncMap{
	// json is a value as compact JSON: {{json .filter_groups}}.
	"json": func(v any) (string, error) {
		b, err := json.Marshal(v)
		return string(b), err
	},
	// join joins a list's items with sep: {{join .ids ","}}.
	"join": func(v any, sep string) string {
		items, _ := v.([]any)
		parts := make([]string, len(items))
		for i, it := range items {
			parts[i] = fmt.Sprint(it)
		}
		return strings.Join(parts, sep)
	},
}

// Write writes v, a whole result: indented JSON, a YAML document, the
// template's output or the jq expression's results (a string as it is,
// any other value as compact JSON, one a line). Output that does not end
// in a newline gets one. It must not be called for Table.
func (f *Format) Write(w io.Writer, v any) error {
	if f.kind == JSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	}
	return f.write(w, v, false)
}

// WriteItem writes v, one item of a stream (herald tail): compact JSON on
// one line, a YAML document opened by "---", or the template's or jq
// expression's output for it.
func (f *Format) WriteItem(w io.Writer, v any) error {
	if f.kind == JSON {
		return json.NewEncoder(w).Encode(v)
	}
	return f.write(w, v, true)
}

func (f *Format) write(w io.Writer, v any, item bool) error {
	g, err := generic(v)
	if err != nil {
		return err
	}
	var buf bytes.Buffer
	switch f.kind {
	case YAML:
		if item {
			buf.WriteString("---\n")
		}
		enc := yaml.NewEncoder(&buf)
		enc.SetIndent(2)
		if err := enc.Encode(g); err != nil {
			return err
		}
		if err := enc.Close(); err != nil {
			return err
		}
	case Template:
		if err := f.tmpl.Execute(&buf, g); err != nil {
			return fmt.Errorf("output template: %w", err)
		}
		if buf.Len() > 0 && !bytes.HasSuffix(buf.Bytes(), []byte("\n")) {
			buf.WriteByte('\n')
		}
	case JQ:
		iter := f.query.Run(g)
		for {
			r, ok := iter.Next()
			if !ok {
				break
			}
			if err, ok := r.(error); ok {
				var halt *gojq.HaltError
				if errors.As(err, &halt) && halt.Value() == nil {
					break
				}
				return fmt.Errorf("jq: %w", err)
			}
			if s, ok := r.(string); ok {
				buf.WriteString(s)
			} else {
				b, err := gojq.Marshal(r)
				if err != nil {
					return fmt.Errorf("jq: %w", err)
				}
				buf.Write(b)
			}
			buf.WriteByte('\n')
		}
	default:
		return fmt.Errorf("output format %q writes no value", f.kind)
	}
	_, err = w.Write(buf.Bytes())
	return err
}

// generic is v's JSON form as nil, bool, int, float64, string, []any and
// map[string]any: what gojq, text/template and YAML take alike.
func generic(v any) (any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var g any
	if err := dec.Decode(&g); err != nil {
		return nil, err
	}
	return numbers(g), nil
}

// numbers turns json.Numbers into int when whole and in range, else
// float64.
func numbers(v any) any {
	switch t := v.(type) {
	case json.Number:
		if i, err := t.Int64(); err == nil && int64(int(i)) == i {
			return int(i)
		}
		f, _ := t.Float64()
		return f
	case []any:
		for i := range t {
			t[i] = numbers(t[i])
		}
	case map[string]any:
		for k := range t {
			t[k] = numbers(t[k])
		}
	}
	return v
}
