package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/auth/jwtauth"
)

// Authenticator returns the token table: Tokens plus DevToken, whose
// principal is auth.DevPrincipalID.
func (c Config) Authenticator() auth.StaticTokens {
	out := make(auth.StaticTokens, len(c.Tokens)+1)
	for t, p := range c.Tokens {
		out[t] = p
	}
	for t, p := range auth.DevToken(c.DevToken) {
		out[t] = p
	}
	return out
}

// LoopbackAddr reports whether a listen address (host:port) accepts
// connections from this machine only: its host is "localhost" or a
// loopback IP (127.0.0.0/8, ::1). An empty host, a wildcard (0.0.0.0,
// ::) and any other name are not loopback; names are not resolved.
func LoopbackAddr(hostport string) bool {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// builtInDevTokenOff says why the built-in development token
// (DefaultDevToken, which the README makes public knowledge) may not be
// used with c, or "" when it may: only the local adapter, listening on a
// loopback address, without an identity provider.
func (c Config) builtInDevTokenOff() string {
	switch {
	case c.Profile.Cloud():
		return "the " + c.Profile.String() + " profile has no development token unless you set one"
	case !LoopbackAddr(c.Addr):
		return fmt.Sprintf("%s %s is not a loopback address", EnvAddr, c.Addr)
	case c.JWTEnabled():
		return "an identity provider is configured (" + EnvJWTIssuer + " or " + EnvJWTJWKSURL + ")"
	}
	return ""
}

// checkDevToken holds DevToken to the development token's rules (see
// docs/auth.md, "The development token"): the built-in value only where
// builtInDevTokenOff allows it, and a token of one's own of at least
// MinCloudTokenLength characters wherever Herald is reachable beyond
// loopback. Its errors name no variable and quote no token.
func (c Config) checkDevToken() error {
	if c.DevToken == "" {
		return nil
	}
	if c.DevToken == DefaultDevToken {
		if why := c.builtInDevTokenOff(); why != "" {
			return fmt.Errorf("the built-in development token is accepted only by the local adapter on a loopback address without an identity provider (here %s): set %s to a token of your own (at least %d characters), or leave it unset", why, EnvDevToken, MinCloudTokenLength)
		}
		return nil
	}
	if (c.Profile.Cloud() || !LoopbackAddr(c.Addr)) && len(c.DevToken) < MinCloudTokenLength {
		return fmt.Errorf("the token is shorter than %d characters", MinCloudTokenLength)
	}
	return nil
}

// loadTokens settles HERALD_DEV_TOKEN (the built-in default is dropped
// where it is off, see builtInDevTokenOff; a value set explicitly is the
// opt-in and is checked by checkDevToken), reads its companions,
// HERALD_TOKENS and HERALD_TOKENS_FILE, into c.Tokens, and checks that
// some token (or an identity provider) is configured wherever Herald is
// reachable beyond loopback, and that no such token is short.
func (c *Config) loadTokens(get func(string) string, fail func(name, format string, args ...any)) {
	if get(EnvDevToken) == "" && c.DevToken == DefaultDevToken && c.builtInDevTokenOff() != "" {
		c.DevToken = ""
	}
	if err := c.checkDevToken(); err != nil {
		fail(EnvDevToken, "%v", err)
	}
	c.Tokens = auth.StaticTokens{}
	owner := map[string]string{} // token → variable that gave it
	if c.DevToken != "" {
		owner[c.DevToken] = EnvDevToken
	}
	addTokens := func(name string, raw []byte) {
		ts, err := ParseTokens(raw)
		if err != nil {
			fail(name, "%v", err)
			return
		}
		for t, pr := range ts {
			if prev, dup := owner[t]; dup {
				fail(name, "the token of principal %q is also given by %s", pr.ID, prev)
				continue
			}
			owner[t] = name
			c.Tokens[t] = pr
		}
	}
	if s := get(EnvTokens); s != "" {
		addTokens(EnvTokens, []byte(s))
	}
	if path := get(EnvTokensFile); path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			fail(EnvTokensFile, "cannot read %s: %v", path, errors.Unwrap(err))
		} else {
			addTokens(EnvTokensFile, b)
		}
	}
	if !c.Profile.Cloud() {
		if LoopbackAddr(c.Addr) || len(owner) > 0 || c.JWTEnabled() {
			return
		}
		fail(EnvDevToken, "no bearer token is configured: the built-in development token is off because %s %s is not a loopback address; set %s to a token of your own (at least %d characters), or set %s, %s or an identity provider (%s)",
			EnvAddr, c.Addr, EnvDevToken, MinCloudTokenLength, EnvTokens, EnvTokensFile, EnvJWTIssuer)
		return
	}
	if len(owner) == 0 && !c.JWTEnabled() {
		fail(EnvTokens, "no bearer token is configured: set %s (or %s, or %s), or an identity provider (%s)", EnvTokens, EnvTokensFile, EnvDevToken, EnvJWTIssuer)
	}
	for t, pr := range c.Tokens {
		if len(t) < MinCloudTokenLength {
			fail(owner[t], "the token of principal %q is shorter than %d characters", pr.ID, MinCloudTokenLength)
		}
	}
}

// loadJWT reads the HERALD_JWT_* variables into c.JWT.
func (c *Config) loadJWT(get, val func(string) string, fail func(name, format string, args ...any)) {
	c.JWT = jwtauth.Config{
		Issuer: get(EnvJWTIssuer), JWKSURL: get(EnvJWTJWKSURL), Audiences: list(get(EnvJWTAudience)),
		PermissionsClaim: val(EnvJWTPermissionsClaim), PrincipalClaim: val(EnvJWTPrincipalClaim),
		Algorithms: list(get(EnvJWTAlgorithms)), ScopePrefix: get(EnvJWTScopePrefix),
	}
	if s := get(EnvJWTGrants); s != "" {
		if err := json.Unmarshal([]byte(s), &c.JWT.Grants); err != nil {
			fail(EnvJWTGrants, `must be a JSON object from principal to a list of permissions: {"<principal>": ["publish:app.*"]}`)
		}
		for id, perms := range c.JWT.Grants {
			if auth.Reserved(id) {
				fail(EnvJWTGrants, "principal %q: ids starting with %q are reserved for Herald's own principals, which no token can claim", id, auth.ReservedPrincipalPrefix)
			}
			for _, perm := range perms {
				if !knownPermission(perm) {
					fail(EnvJWTGrants, "principal %q: unknown permission %q", id, perm)
				}
			}
		}
	}
	if !c.JWTEnabled() {
		for _, name := range []string{EnvJWTAudience, EnvJWTAlgorithms, EnvJWTScopePrefix, EnvJWTGrants} {
			if get(name) != "" {
				fail(name, "is set, but neither %s nor %s is", EnvJWTIssuer, EnvJWTJWKSURL)
			}
		}
		return
	}
	if err := c.JWT.Validate(); err != nil {
		// Each of Validate's errors starts with its variable.
		for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
			name, msg, _ := strings.Cut(e.Error(), ": ")
			fail(name, "%s", msg)
		}
	}
}

// list splits a comma- or space-separated value; "" is nil.
func list(s string) []string {
	if out := strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' }); len(out) > 0 {
		return out
	}
	return nil
}

// checkOrigin accepts "*" or a serialized origin: scheme://host[:port],
// without path, query or trailing slash (what a browser sends in Origin).
func checkOrigin(o string) error {
	if o == "*" {
		return nil
	}
	u, err := url.Parse(o)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" || u.RawQuery != "" || u.User != nil {
		return fmt.Errorf("%q is not an origin such as https://app.example.com (scheme and host, no path)", o)
	}
	return nil
}

// tokenEntry is one principal in HERALD_TOKENS.
type tokenEntry struct {
	ID          string   `json:"id"`
	Permissions []string `json:"permissions"`
}

// ParseTokens parses the HERALD_TOKENS format. Its errors never contain a
// token: entries are named by principal id.
func ParseTokens(raw []byte) (auth.StaticTokens, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		var se *json.SyntaxError
		if errors.As(err, &se) {
			return nil, fmt.Errorf("not valid JSON (syntax error at byte %d)", se.Offset)
		}
		return nil, errors.New(`must be a JSON object from token to {"id": "…", "permissions": ["…"]}`)
	}
	out := make(auth.StaticTokens, len(m))
	n := 0
	for token, rawEntry := range m {
		n++
		var e tokenEntry
		dec := json.NewDecoder(strings.NewReader(string(rawEntry)))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf(`an entry is not {"id": "…", "permissions": ["…"]} (%s)`, entryProblem(err))
		}
		if strings.TrimSpace(token) == "" || token != strings.TrimSpace(token) {
			return nil, fmt.Errorf("the token of principal %q is empty or has surrounding spaces", e.ID)
		}
		if e.ID == "" {
			return nil, errors.New(`an entry has no "id"`)
		}
		if auth.Reserved(e.ID) {
			return nil, fmt.Errorf("principal %q: ids starting with %q are reserved for Herald's own principals", e.ID, auth.ReservedPrincipalPrefix)
		}
		if len(e.Permissions) == 0 {
			return nil, fmt.Errorf("principal %q has no permissions", e.ID)
		}
		for _, perm := range e.Permissions {
			if !knownPermission(perm) {
				return nil, fmt.Errorf("principal %q: unknown permission %q (known: %s, %s, %s, %sPATTERN, %sPATTERN, %s, %s, %s, %s, %s)",
					e.ID, perm, auth.PermReadEvents, auth.PermManageDestinations, auth.PermRunJobs, auth.PermPublishPrefix,
					auth.PermReceivePrefix, auth.PermConsumeDurableQueues, auth.PermCreateDurableQueues,
					auth.PermDeleteDurableQueues, auth.PermInspectDeadLetters, auth.PermAll)
			}
		}
		out[token] = &auth.Principal{ID: e.ID, Permissions: e.Permissions}
	}
	return out, nil
}

// entryProblem describes a decoding error of one entry without quoting
// the input (which sits next to a token).
func entryProblem(err error) string {
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &te) && te.Field != "":
		return te.Field + " has the wrong type"
	case strings.HasPrefix(err.Error(), "json: unknown field "):
		return strings.TrimPrefix(err.Error(), "json: ")
	default:
		return "not a JSON object"
	}
}

func knownPermission(p string) bool { return auth.Known(p) }
