package cli

import (
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"

	"github.com/heraldevents/herald/client"
)

// table writes rows aligned under a header.
type table struct{ tw *tabwriter.Writer }

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) { fmt.Fprintln(t.tw, strings.Join(cells, "\t")) }

func (t *table) flush() error { return t.tw.Flush() }

// groupsText is a one-cell summary of filter groups.
func groupsText(gs []client.FilterGroup) string {
	if len(gs) == 0 {
		return "(every event)"
	}
	parts := make([]string, len(gs))
	for i, g := range gs {
		s := g.EventType
		if len(g.Filters) > 0 {
			fs := make([]string, len(g.Filters))
			for j, f := range g.Filters {
				fs[j] = f.FilterType + ":" + f.ResourceID
			}
			s += "[" + strings.Join(fs, ",") + "]"
		}
		parts[i] = s
	}
	return strings.Join(parts, " ")
}

func orDash(s *string) string {
	if s == nil || *s == "" {
		return "-"
	}
	return *s
}

// isTerminal says whether w is a terminal (progress bars go only there).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// progress is a progress bar on a terminal, nothing elsewhere.
type progress struct{ bar *progressbar.ProgressBar }

func newProgress(w io.Writer, total int, what string) *progress {
	if !isTerminal(w) || total <= 0 {
		return &progress{}
	}
	// Drawn at once and left in place when done, so that even a run that
	// ends in one step shows what it did.
	return &progress{bar: progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionSetWidth(30), progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }))}
}

func (p *progress) set(n int) {
	if p.bar != nil {
		_ = p.bar.Set(n)
	}
}

func (p *progress) done() {
	if p.bar != nil {
		_ = p.bar.Finish()
	}
}
