package grpcapi_test

import (
	"os"
	"testing"

	"github.com/heraldevents/herald/internal/logcheck"
)

// TestMain fails the run when a line logged through slog.Default held a
// credential (package internal/logcheck); local.Start checks the lines of
// its instances' own loggers.
func TestMain(m *testing.M) { os.Exit(logcheck.Main(m)) }
