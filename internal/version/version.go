// Package version reports the version, commit and build date stamped into
// a Herald binary at build time.
//
// The release build (make release, GoReleaser) sets the three variables with
// the linker:
//
//	-ldflags "-X github.com/heraldevents/herald/internal/version.Version=v1.2.3
//	          -X github.com/heraldevents/herald/internal/version.Commit=abc1234
//	          -X github.com/heraldevents/herald/internal/version.Date=2026-12-02T00:00:00Z"
//
// A binary built without them (go run, go build, go install) falls back to
// what the Go toolchain records in the binary (runtime/debug.ReadBuildInfo):
// the module version for go install, and the VCS revision and time when it
// was built from a Git checkout.
package version

import (
	"runtime/debug"
	"sync"
)

// Stamped at build time with -ldflags -X; empty when not stamped.
var (
	// Version is the semantic version of the release, e.g. "v0.4.0".
	Version string
	// Commit is the Git commit the binary was built from.
	Commit string
	// Date is the build time, RFC 3339 in UTC.
	Date string
)

// Info is what a binary knows about its build.
type Info struct {
	Version string `json:"version"` // semantic version, or "devel"
	Commit  string `json:"commit,omitempty"`
	Date    string `json:"date,omitempty"`
}

var (
	once sync.Once
	info Info
)

// Get returns the build information: the stamped values where set, else
// what the toolchain recorded, else Version "devel".
func Get() Info {
	once.Do(func() {
		info = Info{Version: Version, Commit: Commit, Date: Date}
		if bi, ok := debug.ReadBuildInfo(); ok {
			if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
				info.Version = bi.Main.Version
			}
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					if info.Commit == "" {
						info.Commit = s.Value
					}
				case "vcs.time":
					if info.Date == "" {
						info.Date = s.Value
					}
				}
			}
		}
		if info.Version == "" {
			info.Version = "devel"
		}
	})
	return info
}

// String formats the information on one line: "v1.2.3 (abc1234, 2026-12-02T00:00:00Z)".
func (i Info) String() string {
	s := i.Version
	switch {
	case i.Commit != "" && i.Date != "":
		s += " (" + i.Commit + ", " + i.Date + ")"
	case i.Commit != "":
		s += " (" + i.Commit + ")"
	}
	return s
}
