package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestCIFuzzesEveryTarget: every fuzz target in the module (func FuzzX in
// a _test.go file) is listed in .ci/fuzz.sh, which CI runs, so a new
// parser's fuzz target cannot be left out of CI by accident.
func TestCIFuzzesEveryTarget(t *testing.T) {
	t.Parallel()
	script, err := os.ReadFile("../.ci/fuzz.sh")
	require.NoError(t, err)
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*(\./\S+):(Fuzz\w+)\s*$`).FindAllStringSubmatch(string(script), -1) {
		listed[m[1]+":"+m[2]] = true
	}
	fuzz := regexp.MustCompile(`(?m)^func (Fuzz\w+)\(\w+ \*testing\.F\)`)
	found := 0
	err = filepath.WalkDir("..", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != ".." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "bin") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, "_test.go") {
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		pkg := "./" + filepath.ToSlash(strings.TrimPrefix(filepath.Dir(path), "../"))
		for _, m := range fuzz.FindAllStringSubmatch(string(b), -1) {
			found++
			require.True(t, listed[pkg+":"+m[1]], "%s (%s) is not run by .ci/fuzz.sh: add %s:%s to its targets", m[1], path, pkg, m[1])
		}
		return nil
	})
	require.NoError(t, err)
	require.NotZero(t, found, "no fuzz target found")
}
