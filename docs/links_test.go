package docs_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// mdLink matches an inline Markdown link or image: [text](target) or
// [text](target "title"). Reference-style links are not used in the docs.
var mdLink = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// inlineCode matches a code span, whose brackets are not links.
var inlineCode = regexp.MustCompile("`[^`]*`")

// TestRelativeLinks resolves every relative link of README.md and
// docs/*.md: the file it names exists (relative to the linking file, as
// GitHub resolves it), and its #anchor, if any, is a heading of that file
// by GitHub's rule (see anchors). Links to other sites are not fetched.
func TestRelativeLinks(t *testing.T) {
	t.Parallel()
	anchorsOf := map[string]map[string]bool{}
	anchorSet := func(path string) map[string]bool {
		if a, ok := anchorsOf[path]; ok {
			return a
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		a := anchors(string(b))
		anchorsOf[path] = a
		return a
	}
	n := 0
	for _, file := range files(t) {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		inFence := false
		for i, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(strings.TrimSpace(line), "```") {
				inFence = !inFence
				continue
			}
			if inFence {
				continue
			}
			for _, m := range mdLink.FindAllStringSubmatch(inlineCode.ReplaceAllString(line, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				n++
				path, anchor, _ := strings.Cut(target, "#")
				resolved := file
				if path != "" {
					resolved = filepath.Join(filepath.Dir(file), path)
					if _, err := os.Stat(resolved); err != nil {
						t.Errorf("%s:%d: link %s: %s does not exist", file, i+1, target, resolved)
						continue
					}
				}
				if anchor == "" {
					continue
				}
				if !strings.HasSuffix(resolved, ".md") {
					t.Errorf("%s:%d: link %s: an anchor into a file that is not Markdown", file, i+1, target)
					continue
				}
				if !anchorSet(resolved)[anchor] {
					t.Errorf("%s:%d: link %s: %s has no heading with anchor #%s", file, i+1, target, resolved, anchor)
				}
			}
		}
	}
	if n == 0 {
		t.Fatal("no relative link found: the link pattern is broken")
	}
}

// anchors returns the anchors GitHub gives the headings of a Markdown
// document: the heading's text lower-cased, with every character other
// than letters, digits, spaces, hyphens and underscores removed, and
// spaces turned into hyphens; a repeated anchor gets -1, -2, … Markup in
// the heading (code spans, links) counts by its text.
func anchors(doc string) map[string]bool {
	out := map[string]bool{}
	inFence := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			continue
		}
		if inFence || !strings.HasPrefix(line, "#") {
			continue
		}
		text := strings.TrimSpace(strings.TrimLeft(line, "#"))
		text = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`).ReplaceAllString(text, "$1")
		var b strings.Builder
		for _, r := range strings.ToLower(text) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r > 127 && isLetter(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		base := a
		for k := 1; out[a]; k++ {
			a = base + "-" + itoa(k)
		}
		out[a] = true
	}
	return out
}

func isLetter(r rune) bool {
	return strings.ContainsRune("àáâäãåçèéêëìíîïñòóôöõùúûüýÿæœß", r) || r >= 0x0370
}

func itoa(k int) string {
	const digits = "0123456789"
	if k < 10 {
		return digits[k : k+1]
	}
	return itoa(k/10) + digits[k%10:k%10+1]
}
