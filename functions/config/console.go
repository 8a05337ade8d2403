package config

import (
	"encoding/base64"
	"net/url"
	"slices"
	"strings"

	"github.com/heraldevents/herald/auth/jwtauth"
)

// ConsoleOIDC is the console's sign-in through the identity provider of
// HERALD_JWT_ISSUER (package functions/consoleauth).
type ConsoleOIDC struct {
	// ClientID is HERALD_CONSOLE_OIDC_CLIENT_ID; "" leaves OIDC sign-in off.
	ClientID string
	// ClientSecret is HERALD_CONSOLE_OIDC_CLIENT_SECRET ("" for a public
	// client). A secret: never logged.
	ClientSecret string
	// Scopes is HERALD_CONSOLE_OIDC_SCOPES (default "openid").
	Scopes []string
	// RedirectURL is HERALD_CONSOLE_OIDC_REDIRECT_URL ("" derives it from
	// each request).
	RedirectURL string
	// SessionKey is HERALD_CONSOLE_SESSION_KEY decoded (32 bytes), nil for
	// a random key per process. A secret: never logged.
	SessionKey []byte
}

// Enabled reports whether the console signs in through the identity
// provider.
func (o ConsoleOIDC) Enabled() bool { return o.ClientID != "" }

// loadConsoleOIDC reads the HERALD_CONSOLE_OIDC_* variables and
// HERALD_CONSOLE_SESSION_KEY into c.ConsoleOIDC. Errors never quote the
// secret or the key.
func (c *Config) loadConsoleOIDC(get, val func(string) string, fail func(name, format string, args ...any)) {
	o := ConsoleOIDC{
		ClientID: get(EnvConsoleOIDCClientID), ClientSecret: get(EnvConsoleOIDCClientSecret),
		Scopes: list(val(EnvConsoleOIDCScopes)), RedirectURL: get(EnvConsoleOIDCRedirectURL),
	}
	if k := get(EnvConsoleSessionKey); k != "" {
		b, err := base64.StdEncoding.DecodeString(k)
		if err != nil {
			b, err = base64.RawURLEncoding.DecodeString(strings.TrimRight(k, "="))
		}
		if err != nil || len(b) != 32 {
			fail(EnvConsoleSessionKey, "must be 32 random bytes in base64 (e.g. the output of `openssl rand -base64 32`)")
		}
		o.SessionKey = b
	}
	if !o.Enabled() {
		for _, name := range []string{EnvConsoleOIDCClientSecret, EnvConsoleOIDCRedirectURL, EnvConsoleOIDCScopes} {
			if get(name) != "" {
				fail(name, "is set, but %s is not", EnvConsoleOIDCClientID)
			}
		}
		o.Scopes = nil // the default means nothing without a client
		c.ConsoleOIDC = o
		return
	}
	if c.JWT.Issuer == "" {
		fail(EnvConsoleOIDCClientID, "needs %s: the identity provider the console signs in at", EnvJWTIssuer)
	}
	if !slices.Contains(o.Scopes, "openid") {
		fail(EnvConsoleOIDCScopes, "must include openid (the console verifies the ID token)")
	}
	if o.RedirectURL != "" {
		u, perr := url.Parse(o.RedirectURL)
		if err := jwtauth.CheckFetchURL(o.RedirectURL); err != nil {
			fail(EnvConsoleOIDCRedirectURL, "%v", err)
		} else if perr != nil || u.Path != "/console/callback" || u.RawQuery != "" || u.Fragment != "" {
			fail(EnvConsoleOIDCRedirectURL, "must be Herald's own /console/callback, such as https://herald.example.com/console/callback")
		}
	}
	c.ConsoleOIDC = o
}
