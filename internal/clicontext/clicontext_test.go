package clicontext

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestSaveLoad(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CONFIG_HOME", dir)
	t.Setenv("HOME", dir) // macOS and others read HOME
	f, err := Load()
	require.NoError(t, err)
	assert.Empty(t, f.Contexts, "no file: no contexts")

	f.Contexts["prod"] = Context{URL: "https://herald.example.com", Token: "secret-token-value-1234"}
	f.Contexts["dev"] = Context{URL: "http://127.0.0.1:8080"}
	f.Current = "prod"
	require.NoError(t, f.Save())

	p, err := Path()
	require.NoError(t, err)
	st, err := os.Stat(p)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o600), st.Mode().Perm(), "the file holds tokens")
	dst, err := os.Stat(filepath.Dir(p))
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o700), dst.Mode().Perm())
	left, err := filepath.Glob(filepath.Join(filepath.Dir(p), FileName+".*"))
	require.NoError(t, err)
	assert.Empty(t, left, "no temporary file left behind")

	g, err := Load()
	require.NoError(t, err)
	assert.Equal(t, f, g)
	assert.Equal(t, []string{"dev", "prod"}, g.Names())

	require.NoError(t, os.WriteFile(p, []byte("{not json"), 0o600))
	_, err = Load()
	assert.ErrorContains(t, err, p)
}

func TestCheckName(t *testing.T) {
	for _, ok := range []string{"prod", "a", "eu-west.1_b", "9"} {
		assert.NoError(t, CheckName(ok), ok)
	}
	for _, bad := range []string{"", "-x", ".x", "a/b", "a b", "../x", string(make([]byte, 65))} {
		assert.Error(t, CheckName(bad), bad)
	}
}

func TestMask(t *testing.T) {
	assert.Equal(t, "", Mask(""))
	assert.Equal(t, "****", Mask("dev-token"))
	assert.Equal(t, "****1234", Mask("secret-token-value-1234"))
	assert.NotContains(t, Mask("secret-token-value-1234"), "secret")
}
