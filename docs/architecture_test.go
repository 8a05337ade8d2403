package docs_test

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// packageRow matches a row of docs/architecture.md's "Every package"
// table: | `path` | … |.
var packageRow = regexp.MustCompile("(?m)^\\| `([^`]+)` \\| ")

// TestArchitectureListsEveryPackage holds docs/architecture.md's package
// table to the module: every directory holding Go files is a row, and
// every row is such a directory.
func TestArchitectureListsEveryPackage(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("architecture.md")
	if err != nil {
		t.Fatal(err)
	}
	doc := string(b)
	_, table, ok := strings.Cut(doc, "\n## Every package\n")
	if !ok {
		t.Fatal(`architecture.md has no "## Every package" section`)
	}
	listed := map[string]bool{}
	for _, m := range packageRow.FindAllStringSubmatch(table, -1) {
		listed[m[1]] = true
	}

	var pkgs []string
	err = filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		name := d.Name()
		if d.IsDir() {
			if path != ".." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" ||
				path == "../bin" || path == "../dist" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") {
			rel, err := filepath.Rel("..", filepath.Dir(path))
			if err != nil {
				return err
			}
			pkgs = append(pkgs, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	sort.Strings(pkgs)
	found := map[string]bool{}
	for _, p := range pkgs {
		if found[p] {
			continue
		}
		found[p] = true
		if !listed[p] {
			t.Errorf("architecture.md, \"Every package\": package %s is missing (add a row | `%s` | what it is |)", p, p)
		}
	}
	for p := range listed {
		if !found[p] {
			t.Errorf("architecture.md, \"Every package\": %s is listed but holds no Go file", p)
		}
	}
}
