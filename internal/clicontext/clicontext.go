// Package clicontext stores the herald command's contexts: named
// deployments (a URL and a bearer token) the user switches between, as
// `nats context` and `gcloud config configurations` do.
//
// They live in one JSON file, contexts.json, in herald's directory of the
// user's configuration directory (os.UserConfigDir: $XDG_CONFIG_HOME or
// ~/.config on Linux, ~/Library/Application Support on macOS, %AppData%
// on Windows), written with mode 0600 in a 0700 directory, since it holds
// tokens. A write replaces the file atomically (a temporary file renamed
// over it), so a crash leaves the old file or the new one.
package clicontext

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
)

// FileName is the file's name in Dir.
const FileName = "contexts.json"

// Context is one named deployment.
type Context struct {
	// URL is Herald's base URL.
	URL string `json:"url"`
	// Token is the bearer token ("" for none). It is never printed back
	// in full: see Mask.
	Token string `json:"token,omitempty"`
	// Description is the user's own note.
	Description string `json:"description,omitempty"`
}

// File is the file's content.
type File struct {
	// Current names the context `herald context use` selected ("" none).
	Current  string             `json:"current,omitempty"`
	Contexts map[string]Context `json:"contexts"`
}

// validName is what a context may be called: it is typed on command
// lines and shown in tables.
var validName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// CheckName says why name cannot name a context (nil when it can): 1–64
// letters, digits, '.', '_' or '-', starting with a letter or digit.
func CheckName(name string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("context name %q must be 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
	}
	return nil
}

// ErrNoConfigDir says the user has no configuration directory (neither
// $XDG_CONFIG_HOME nor $HOME on Linux): there is nowhere to keep contexts.
var ErrNoConfigDir = errors.New("no configuration directory to keep contexts in")

// Dir is herald's configuration directory: UserConfigDir/herald. Without
// a configuration directory it is an error wrapping ErrNoConfigDir.
func Dir() (string, error) {
	d, err := os.UserConfigDir()
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrNoConfigDir, err)
	}
	return filepath.Join(d, "herald"), nil
}

// Path is the contexts file's path.
func Path() (string, error) {
	d, err := Dir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, FileName), nil
}

// Load reads the contexts file; a missing file is an empty File, not an
// error. A file that is not valid JSON is an error naming the file.
func Load() (*File, error) {
	p, err := Path()
	if err != nil {
		return nil, err
	}
	f := &File{Contexts: map[string]Context{}}
	b, err := os.ReadFile(p)
	if errors.Is(err, fs.ErrNotExist) {
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read contexts: %w", err)
	}
	if err := json.Unmarshal(b, f); err != nil {
		return nil, fmt.Errorf("contexts file %s is not valid JSON: %v", p, err)
	}
	if f.Contexts == nil {
		f.Contexts = map[string]Context{}
	}
	return f, nil
}

// Save writes f atomically, creating the directory (0700) if needed; the
// file is 0600.
func (f *File) Save() error {
	p, err := Path()
	if err != nil {
		return err
	}
	dir := filepath.Dir(p)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create %s: %w", dir, err)
	}
	b, err := json.MarshalIndent(f, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, FileName+".*")
	if err != nil {
		return fmt.Errorf("write contexts: %w", err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename, a no-op
	if err := tmp.Chmod(0o600); err != nil {
		tmp.Close()
		return fmt.Errorf("write contexts: %w", err)
	}
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("write contexts: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write contexts: %w", err)
	}
	if err := os.Rename(tmp.Name(), p); err != nil {
		return fmt.Errorf("write contexts: %w", err)
	}
	return nil
}

// Names are the contexts' names, sorted.
func (f *File) Names() []string {
	names := make([]string, 0, len(f.Contexts))
	for n := range f.Contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Mask is a token as it may be shown: "" for none; the last four
// characters after asterisks for a token of 16 characters or more; only
// asterisks for a shorter one, whose last four would give too much away.
func Mask(token string) string {
	switch {
	case token == "":
		return ""
	case len(token) >= 16:
		return "****" + token[len(token)-4:]
	}
	return "****"
}
