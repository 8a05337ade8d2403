package outfmt

import (
	"bytes"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type sample struct {
	ID         string   `json:"id"`
	Generation int64    `json:"generation"`
	Tags       []string `json:"tags"`
	Ratio      float64  `json:"ratio"`
}

var v = sample{ID: "c-1", Generation: 12, Tags: []string{"a", "b"}, Ratio: 0.5}

func write(t *testing.T, spec string, item bool, val any) string {
	t.Helper()
	f, err := Parse(spec)
	require.NoError(t, err)
	var b bytes.Buffer
	if item {
		require.NoError(t, f.WriteItem(&b, val))
	} else {
		require.NoError(t, f.Write(&b, val))
	}
	return b.String()
}

func TestFormats(t *testing.T) {
	assert.Equal(t, "{\n  \"id\": \"c-1\",\n  \"generation\": 12,\n  \"tags\": [\n    \"a\",\n    \"b\"\n  ],\n  \"ratio\": 0.5\n}\n", write(t, "json", false, v))
	assert.Equal(t, `{"id":"c-1","generation":12,"tags":["a","b"],"ratio":0.5}`+"\n", write(t, "json", true, v))
	assert.Equal(t, "generation: 12\nid: c-1\nratio: 0.5\ntags:\n  - a\n  - b\n", write(t, "yaml", false, v))
	assert.Equal(t, "---\ngeneration: 12\nid: c-1\nratio: 0.5\ntags:\n  - a\n  - b\n", write(t, "yaml", true, v))
	// A whole number is an integer, and a newline is added.
	assert.Equal(t, "c-1 12 a,b [\"a\",\"b\"]\n", write(t, `template={{.id}} {{.generation}} {{join .tags ","}} {{json .tags}}`, false, v))
	assert.Equal(t, "line\n", write(t, "template=line\n", false, v), "no second newline")
	assert.Equal(t, "", write(t, `template={{if .missing}}x{{end}}`, false, v), "a missing key is empty, not an error")
	// jq: strings raw, other values compact JSON, one a line.
	assert.Equal(t, "c-1\n12\n[\"a\",\"b\"]\n", write(t, "jq=.id, .generation, .tags", false, v))
	assert.Equal(t, "b\n", write(t, "jq=.[] | select(.generation > 10) | .tags[1]", false, []sample{v, {ID: "x", Generation: 1}}))
	assert.Equal(t, "1\n", write(t, "jq=1, halt, 2", false, v))
}

func TestParseErrors(t *testing.T) {
	for _, spec := range []string{"", "xml", "json=x", "table=1", "template=", "template={{.id", "jq=", "jq=.[", "jq=nosuchfunc(1)"} {
		_, err := Parse(spec)
		assert.Error(t, err, spec)
	}
	f, err := Parse("table")
	require.NoError(t, err)
	assert.True(t, f.IsTable())
	assert.Error(t, f.Write(&bytes.Buffer{}, v), "table is the command's own")
}

func TestRunErrors(t *testing.T) {
	f, err := Parse(`jq=error("boom")`)
	require.NoError(t, err)
	assert.ErrorContains(t, f.Write(&bytes.Buffer{}, v), "boom")
	f, err = Parse(`template={{index .tags 5}}`)
	require.NoError(t, err)
	assert.Error(t, f.Write(&bytes.Buffer{}, v))
}
