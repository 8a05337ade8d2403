package config

import (
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"strings"
)

// The bindings whose parsing is their own.
var (
	// fnField is HERALD_FUNCTION.
	fnField = custom{field: "Function",
		parse: func(c *Config, s string) (err error) {
			c.Function, err = ParseFunction(s)
			return err
		},
		valid: func(c *Config) error {
			_, err := ParseFunction(string(c.Function))
			return err
		}}
	// portField is Cloud Run's PORT: the server listens on 0.0.0.0:$PORT.
	portField = custom{field: "Addr",
		parse: func(c *Config, s string) error {
			if n, err := strconv.Atoi(s); err != nil || n < 1 || n > 65535 {
				return fmt.Errorf("%q is not a TCP port (1-65535)", s)
			}
			c.Addr = "0.0.0.0:" + s
			return nil
		}}
	// logLevelField is HERALD_LOG_LEVEL, by name only (slog also reads
	// "info+2", which the table does not offer).
	consoleField = custom{field: "Console",
		parse: func(c *Config, s string) error {
			switch strings.ToLower(s) {
			case "on", "true", "1":
				c.Console = true
			case "off", "false", "0":
				c.Console = false
			default:
				return fmt.Errorf("%q is neither on nor off", s)
			}
			return nil
		}}
	logLevelField = custom{field: "LogLevel",
		parse: func(c *Config, s string) error {
			switch strings.ToLower(s) {
			case "debug", "info", "warn", "error":
				return c.LogLevel.UnmarshalText([]byte(s))
			}
			return fmt.Errorf("%q is not a log level: debug, info, warn or error", s)
		},
		valid: func(c *Config) error {
			switch c.LogLevel {
			case slog.LevelDebug, slog.LevelInfo, slog.LevelWarn, slog.LevelError:
				return nil
			}
			return fmt.Errorf("%s is not a log level: debug, info, warn or error", c.LogLevel)
		}}
)

// connsField binds a connection bound: ConnsAuto derives it (derive),
// "0" is no bound, else a whole number MinMaxConns–MaxMaxConns.
func connsField(field string, at func(*Config) *int, derive func() int) custom {
	return custom{field: field,
		parse: func(c *Config, s string) error {
			if s == ConnsAuto {
				*at(c) = derive()
				return nil
			}
			n, err := strconv.Atoi(s)
			if err != nil || (n != 0 && (n < MinMaxConns || n > MaxMaxConns)) {
				return fmt.Errorf("%q is not %s, 0 (no bound) or a whole number between %d and %d", s, ConnsAuto, MinMaxConns, MaxMaxConns)
			}
			*at(c) = n
			return nil
		},
		valid: func(c *Config) error {
			if n := *at(c); n < 0 {
				return fmt.Errorf("%d is negative (0 is no bound)", n)
			}
			return nil
		}}
}

// urlWithScheme accepts a URL with a scheme (a broker or store URL); its
// error shows the URL without credentials.
func urlWithScheme(s string) error {
	if parsed, err := url.Parse(s); err != nil || parsed.Scheme == "" {
		return fmt.Errorf("%q is not a URL with a scheme", Redact(s))
	}
	return nil
}

// uriReference accepts a URI-reference: the source is every event's
// CloudEvents `source`, so a bad one is refused here rather than failing
// every publish later.
func uriReference(s string) error {
	if _, err := url.Parse(s); err != nil || strings.ContainsFunc(s, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
		return fmt.Errorf("%q is not a URI-reference (the CloudEvents source), e.g. /herald or https://events.example.com", s)
	}
	return nil
}

// hostPort accepts a listen address, host:port (the host may be empty).
func hostPort(s string) error {
	if _, _, err := net.SplitHostPort(s); err != nil {
		return fmt.Errorf("%q is not a host:port listen address, e.g. 127.0.0.1:6060", s)
	}
	return nil
}

// Redact drops the user info and query of a URL, for logs and errors.
func Redact(u string) string {
	if i := strings.IndexByte(u, '?'); i >= 0 {
		u = u[:i]
	}
	if i := strings.Index(u, "@"); i >= 0 {
		if j := strings.Index(u, "://"); j >= 0 && j < i {
			u = u[:j+3] + "…@" + u[i+1:]
		}
	}
	return u
}
