// Package proclog makes a process write one log format: its slog logger.
//
// A Herald process logs through log/slog, but libraries it links log
// through their own loggers: the standard library's log package (net/http
// without an ErrorLog, and any library calling log.Printf), OpenTelemetry's
// error handler (an export that fails), and gRPC's grpclog (the Google
// Cloud clients). Each writes its own plain format to standard error.
// Install routes all three into one slog.Logger, so that a process's
// output is one format a log pipeline can parse.
package proclog

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"go.opentelemetry.io/otel"
	"google.golang.org/grpc/grpclog"
)

// Install makes logger the process's one log: slog.Default (and through
// it the log package's standard logger, at level Info), OpenTelemetry's
// error handler (level Warn, message "telemetry error") and gRPC's
// logger (its errors at level Error, its warnings and information at
// Debug: gRPC prints only errors by default). Call it once, at start-up,
// before serving. logger's handler must not be slog.Default's own handler
// (that one writes through the log package, which would then loop).
func Install(logger *slog.Logger) {
	slog.SetDefault(logger)
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("telemetry error", "err", err)
	}))
	grpclog.SetLoggerV2(grpcLogger{logger.With("component", "grpc")})
}

// grpcLogger is grpclog.LoggerV2 over slog.
type grpcLogger struct{ l *slog.Logger }

func (g grpcLogger) log(level slog.Level, msg string) {
	g.l.Log(context.Background(), level, msg)
}

func (g grpcLogger) Info(args ...any)   { g.log(slog.LevelDebug, fmt.Sprint(args...)) }
func (g grpcLogger) Infoln(args ...any) { g.log(slog.LevelDebug, sprintln(args)) }
func (g grpcLogger) Infof(format string, args ...any) {
	g.log(slog.LevelDebug, fmt.Sprintf(format, args...))
}
func (g grpcLogger) Warning(args ...any)   { g.log(slog.LevelDebug, fmt.Sprint(args...)) }
func (g grpcLogger) Warningln(args ...any) { g.log(slog.LevelDebug, sprintln(args)) }
func (g grpcLogger) Warningf(format string, args ...any) {
	g.log(slog.LevelDebug, fmt.Sprintf(format, args...))
}
func (g grpcLogger) Error(args ...any)   { g.log(slog.LevelError, fmt.Sprint(args...)) }
func (g grpcLogger) Errorln(args ...any) { g.log(slog.LevelError, sprintln(args)) }
func (g grpcLogger) Errorf(format string, args ...any) {
	g.log(slog.LevelError, fmt.Sprintf(format, args...))
}

// Fatal logs and exits with status 1, as grpclog's own logger does.
func (g grpcLogger) Fatal(args ...any) { g.log(slog.LevelError, fmt.Sprint(args...)); os.Exit(1) }

// Fatalln logs and exits with status 1.
func (g grpcLogger) Fatalln(args ...any) { g.log(slog.LevelError, sprintln(args)); os.Exit(1) }

// Fatalf logs and exits with status 1.
func (g grpcLogger) Fatalf(format string, args ...any) {
	g.log(slog.LevelError, fmt.Sprintf(format, args...))
	os.Exit(1)
}

// V reports whether verbosity level l is on: only 0, gRPC's default.
func (g grpcLogger) V(l int) bool { return l <= 0 }

// sprintln is fmt.Sprintln without its trailing newline.
func sprintln(args []any) string {
	s := fmt.Sprintln(args...)
	return s[:len(s)-1]
}
