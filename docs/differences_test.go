package docs_test

import (
	"os"
	"strings"
	"testing"
)

// TestReadmeListsEveryDifference: every difference from the published
// APIs that docs/compatibility.md lists (the first cell of each row of
// its "Differences that remain" tables) is also named in README.md, in
// bold, so that the README's list cannot fall behind the full one.
func TestReadmeListsEveryDifference(t *testing.T) {
	t.Parallel()
	compat, err := os.ReadFile("compatibility.md")
	if err != nil {
		t.Fatal(err)
	}
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(compat), "\n## Differences that remain\n")
	if !ok {
		t.Fatal(`docs/compatibility.md has no "## Differences that remain" section`)
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	n := 0
	for _, what := range differences(section) {
		n++
		if !strings.Contains(string(readme), "**"+what+"**") {
			t.Errorf("README.md does not list the difference %q of docs/compatibility.md (as **%s**)", what, what)
		}
	}
	if n < 10 {
		t.Fatalf("found %d differences in docs/compatibility.md; the table format changed?", n)
	}
}

// differences returns the first cell of every body row of the Markdown
// tables in section.
func differences(section string) []string {
	var out []string
	header := true
	for _, line := range strings.Split(section, "\n") {
		if !strings.HasPrefix(line, "|") {
			header = true // the next table starts with its header
			continue
		}
		cells := strings.Split(line, "|")
		first := strings.TrimSpace(cells[1])
		switch {
		case header:
			header = false
		case strings.Trim(first, "-: ") == "":
			// the delimiter row
		default:
			out = append(out, first)
		}
	}
	return out
}
