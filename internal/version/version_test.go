package version

import "testing"

func TestStampedValuesWin(t *testing.T) {
	once.Do(func() {}) // keep Get from reading the toolchain's values
	info = Info{}
	Version, Commit, Date = "v1.2.3", "abc1234", "2026-12-02T00:00:00Z"
	defer func() { Version, Commit, Date = "", "", "" }()
	info = Info{Version: Version, Commit: Commit, Date: Date}
	got := Get()
	if got.Version != "v1.2.3" || got.Commit != "abc1234" {
		t.Fatalf("Get() = %+v", got)
	}
	if s := got.String(); s != "v1.2.3 (abc1234, 2026-12-02T00:00:00Z)" {
		t.Fatalf("String() = %q", s)
	}
	if s := (Info{Version: "devel"}).String(); s != "devel" {
		t.Fatalf("String() = %q", s)
	}
}
