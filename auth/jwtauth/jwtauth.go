package jwtauth

import (
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/lestrrat-go/jwx/v3/jwa"
	"github.com/lestrrat-go/jwx/v3/jwk"
	"github.com/lestrrat-go/jwx/v3/jws"
	"github.com/lestrrat-go/jwx/v3/jwt"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/herr"
)

// Defaults and bounds.
const (
	// ClockSkew is how far exp, nbf and iat may be off the local clock: a
	// token expired 20 s ago is still accepted, one expired 40 s ago is not.
	ClockSkew = 30 * time.Second
	// DefaultPermissionsClaim and DefaultPrincipalClaim are the claims read
	// when Config leaves them empty (HERALD_JWT_PERMISSIONS_CLAIM,
	// HERALD_JWT_PRINCIPAL_CLAIM).
	DefaultPermissionsClaim = "scope"
	DefaultPrincipalClaim   = "sub"
	// DefaultRefreshInterval is the least time between two fetches of the
	// key set made because a token named an unknown kid (or none was
	// cached yet).
	DefaultRefreshInterval = 30 * time.Second
	// FetchTimeout bounds one fetch of a discovery document or key set.
	FetchTimeout = 10 * time.Second
	// MinCacheInterval and MaxCacheInterval clamp the key set's own cache
	// lifetime (Cache-Control max-age or Expires); without either header
	// the set is fetched again after MinCacheInterval.
	MinCacheInterval = 5 * time.Minute
	MaxCacheInterval = 24 * time.Hour
	// maxDocumentBytes bounds a discovery document or key set.
	maxDocumentBytes = 1 << 20
)

// asymmetric lists the algorithms a public key set can verify, in the
// order they are documented.
var asymmetric = []jwa.SignatureAlgorithm{
	jwa.RS256(), jwa.RS384(), jwa.RS512(),
	jwa.PS256(), jwa.PS384(), jwa.PS512(),
	jwa.ES256(), jwa.ES384(), jwa.ES512(),
	jwa.EdDSA(),
}

// Algorithms returns the names of the algorithms Herald can accept: the
// default of Config.Algorithms.
func Algorithms() []string {
	out := make([]string, len(asymmetric))
	for i, a := range asymmetric {
		out[i] = a.String()
	}
	return out
}

// Config configures a Verifier. Issuer or JWKSURL is required, and so is
// at least one audience.
type Config struct {
	// Issuer is HERALD_JWT_ISSUER: the expected iss, exactly as the issuer
	// writes it. Without JWKSURL its discovery document names the key set.
	Issuer string
	// JWKSURL is HERALD_JWT_JWKS_URL: the key set's URL, which skips
	// discovery. With JWKSURL alone iss is not checked.
	JWKSURL string
	// Audiences is HERALD_JWT_AUDIENCE: a token's aud (or, without aud,
	// its client_id) must be one of them.
	Audiences []string
	// PermissionsClaim is HERALD_JWT_PERMISSIONS_CLAIM (default "scope").
	PermissionsClaim string
	// PrincipalClaim is HERALD_JWT_PRINCIPAL_CLAIM (default "sub").
	PrincipalClaim string
	// Algorithms is HERALD_JWT_ALGORITHMS: accepted alg values (default
	// Algorithms()). Only asymmetric algorithms are allowed.
	Algorithms []string
	// ScopePrefix is HERALD_JWT_SCOPE_PREFIX: cut from the front of each
	// permission value before it is read ("" for none).
	ScopePrefix string
	// Grants is HERALD_JWT_GRANTS: more permissions by principal id.
	Grants map[string][]string
	// RefreshInterval replaces DefaultRefreshInterval (tests).
	RefreshInterval time.Duration
	// HTTPClient fetches discovery documents and key sets; nil means a
	// client whose requests time out after FetchTimeout. Its redirects are
	// held to the same HTTPS-or-loopback rule.
	HTTPClient *http.Client
	// Now replaces the clock that exp, nbf and iat are checked against.
	Now func() time.Time
	// Logger is told why a fetch of the keys failed (callers get only a
	// 503); nil means slog.Default().
	Logger *slog.Logger
}

// Validate checks c without fetching anything. Each of its joined errors
// starts with the field's variable and ": ".
func (c Config) Validate() error {
	var errs []error
	if c.Issuer == "" && c.JWKSURL == "" {
		errs = append(errs, errors.New("HERALD_JWT_ISSUER: required (or HERALD_JWT_JWKS_URL)"))
	}
	if c.Issuer != "" {
		if err := CheckFetchURL(c.Issuer); err != nil {
			errs = append(errs, fmt.Errorf("HERALD_JWT_ISSUER: %w", err))
		}
	}
	if c.JWKSURL != "" {
		if err := CheckFetchURL(c.JWKSURL); err != nil {
			errs = append(errs, fmt.Errorf("HERALD_JWT_JWKS_URL: %w", err))
		}
	}
	if len(c.Audiences) == 0 || slices.Contains(c.Audiences, "") {
		errs = append(errs, errors.New("HERALD_JWT_AUDIENCE: required with HERALD_JWT_ISSUER or HERALD_JWT_JWKS_URL: the audience Herald's tokens are minted for"))
	}
	if _, err := parseAlgorithms(c.Algorithms); err != nil {
		errs = append(errs, fmt.Errorf("HERALD_JWT_ALGORITHMS: %w", err))
	}
	return errors.Join(errs...)
}

func parseAlgorithms(names []string) (map[string]jwa.SignatureAlgorithm, error) {
	out := map[string]jwa.SignatureAlgorithm{}
	if len(names) == 0 {
		for _, a := range asymmetric {
			out[a.String()] = a
		}
		return out, nil
	}
	for _, n := range names {
		i := slices.IndexFunc(asymmetric, func(a jwa.SignatureAlgorithm) bool { return a.String() == n })
		if i < 0 {
			return nil, fmt.Errorf("%q is not accepted: name asymmetric algorithms only (%s); none and HMAC are never accepted", n, strings.Join(Algorithms(), ", "))
		}
		out[n] = asymmetric[i]
	}
	return out, nil
}

// Verifier is an auth.Authenticator for JWTs. It is safe for concurrent
// use; Close stops its key-set refreshes.
type Verifier struct {
	cfg   Config
	algs  map[string]jwa.SignatureAlgorithm
	clock jwt.Clock
	keys  *keySource
}

// New returns a Verifier for c. It fetches nothing: the discovery
// document and key set are fetched on the first token.
func New(c Config) (*Verifier, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.PermissionsClaim == "" {
		c.PermissionsClaim = DefaultPermissionsClaim
	}
	if c.PrincipalClaim == "" {
		c.PrincipalClaim = DefaultPrincipalClaim
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.RefreshInterval <= 0 {
		c.RefreshInterval = DefaultRefreshInterval
	}
	algs, _ := parseAlgorithms(c.Algorithms)
	keys, err := newKeySource(c)
	if err != nil {
		return nil, err
	}
	v := &Verifier{cfg: c, algs: algs, keys: keys, clock: jwt.ClockFunc(time.Now)}
	if c.Now != nil {
		v.clock = jwt.ClockFunc(c.Now)
	}
	return v, nil
}

// Close stops the background refreshes of the key set.
func (v *Verifier) Close() error { return v.keys.close() }

// invalid is the 401 of a token that fails a check: desc says which, and
// never quotes the token or a claim.
func invalid(desc string) error { return herr.New(herr.Unauthenticated, "%s", desc) }

// Authenticate implements auth.Authenticator. Errors: herr.Unauthenticated
// describing the failed check, or herr.Unavailable when the issuer's keys
// cannot be fetched and no cached key fits.
func (v *Verifier) Authenticate(ctx context.Context, token string) (*auth.Principal, error) {
	tok, err := v.verify(ctx, token)
	if err != nil {
		return nil, err
	}
	if err := v.validate(tok); err != nil {
		return nil, err
	}
	return v.principal(tok)
}

// IDToken is what VerifyIDToken reads from a valid OpenID Connect ID
// token.
type IDToken struct {
	// Subject is the sub claim.
	Subject string
	// Expiry is the exp claim.
	Expiry time.Time
}

// VerifyIDToken checks an OpenID Connect ID token that this Verifier's
// issuer minted for the relying party clientID in answer to an
// authentication request that sent nonce (OpenID Connect Core 1.0,
// section 3.1.3.7): the signature, with the same keys and algorithm rules
// as Authenticate; iss equal to Config.Issuer (required here); aud
// holding clientID, and azp, when present, equal to it; exp, nbf and iat,
// with ClockSkew; a non-empty sub;
// and the nonce claim equal to nonce. Config.Audiences is not consulted:
// an ID token is minted for the client, not for Herald's API. Errors are
// those of Authenticate ("wrong nonce" among them), never quoting a claim.
func (v *Verifier) VerifyIDToken(ctx context.Context, token, clientID, nonce string) (IDToken, error) {
	if v.cfg.Issuer == "" {
		return IDToken{}, invalid("no issuer is configured to check the ID token's iss against")
	}
	tok, err := v.verify(ctx, token)
	if err != nil {
		return IDToken{}, err
	}
	if err := v.validateRegistered(tok); err != nil {
		return IDToken{}, err
	}
	if aud, _ := tok.Audience(); !slices.Contains(aud, clientID) || clientID == "" {
		return IDToken{}, invalid("wrong audience")
	}
	// azp, when present, names the party the token was issued to (Core
	// 1.0, section 2): another client's token listing this one among its
	// audiences is not this client's sign-in.
	var azp string
	if tok.Get("azp", &azp) == nil && azp != clientID {
		return IDToken{}, invalid("wrong authorized party (azp)")
	}
	var got string
	if tok.Get("nonce", &got) != nil || nonce == "" || subtle.ConstantTimeCompare([]byte(got), []byte(nonce)) != 1 {
		return IDToken{}, invalid("wrong nonce")
	}
	sub, ok := tok.Subject()
	if !ok || sub == "" || hasControl(sub) {
		return IDToken{}, invalid("token has no valid sub claim")
	}
	exp, _ := tok.Expiration()
	return IDToken{Subject: sub, Expiry: exp}, nil
}

// verify checks token's header and signature and returns its claims,
// not yet validated.
func (v *Verifier) verify(ctx context.Context, token string) (jwt.Token, error) {
	if !LooksLikeJWT(token) {
		// Most likely a mistyped static token (auth.Chain asks those first).
		return nil, invalid("unknown token (neither a configured token nor a JWT)")
	}
	msg, err := jws.ParseString(token)
	if err != nil || len(msg.Signatures()) != 1 {
		return nil, invalid("malformed token")
	}
	hdr := msg.Signatures()[0].ProtectedHeaders()
	if hdr.Has(jws.CriticalKey) {
		// RFC 7515, section 4.1.11: a recipient must refuse a JWS whose
		// "crit" lists an extension it does not understand, and Herald
		// understands none (an empty list is malformed too). jws.Verify
		// does not hold to this when given a key, so it is checked here.
		return nil, invalid("unsupported critical header (crit)")
	}
	name, _ := hdr.Algorithm()
	alg, ok := v.algs[name.String()]
	if !ok {
		return nil, invalid("token signing algorithm not accepted")
	}
	kid, _ := hdr.KeyID()
	set, err := v.keys.set(ctx, kid)
	if err != nil {
		return nil, err
	}
	var candidates []jwk.Key
	if kid != "" {
		if k, ok := set.LookupKeyID(kid); ok {
			if !fits(alg, k) {
				return nil, invalid("token signing algorithm does not fit its key")
			}
			candidates = append(candidates, k)
		}
	} else {
		for i := range set.Len() {
			if k, ok := set.Key(i); ok && fits(alg, k) {
				candidates = append(candidates, k)
			}
		}
	}
	if len(candidates) == 0 {
		return nil, invalid("unknown signing key")
	}
	verified := slices.ContainsFunc(candidates, func(k jwk.Key) bool {
		_, err := jws.Verify([]byte(token), jws.WithKey(alg, k))
		return err == nil
	})
	if !verified {
		return nil, invalid("bad signature")
	}
	// Verified above; parse the claims without verifying again.
	tok, err := jwt.ParseString(token, jwt.WithVerify(false), jwt.WithValidate(false))
	if err != nil {
		return nil, invalid("malformed token claims")
	}
	return tok, nil
}

// validate checks the registered claims and the audience.
func (v *Verifier) validate(tok jwt.Token) error {
	if err := v.validateRegistered(tok); err != nil {
		return err
	}
	aud, hasAud := tok.Audience()
	if !hasAud || len(aud) == 0 {
		var clientID string
		if tok.Get("client_id", &clientID) == nil && clientID != "" {
			aud = []string{clientID}
		}
	}
	for _, a := range aud {
		if slices.Contains(v.cfg.Audiences, a) {
			return nil
		}
	}
	return invalid("wrong audience")
}

// validateRegistered checks exp (required), nbf, iat and, when
// Config.Issuer is set, iss.
func (v *Verifier) validateRegistered(tok jwt.Token) error {
	opts := []jwt.ValidateOption{
		jwt.WithAcceptableSkew(ClockSkew), jwt.WithClock(v.clock),
		jwt.WithRequiredClaim(jwt.ExpirationKey),
	}
	if v.cfg.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(v.cfg.Issuer))
	}
	if err := jwt.Validate(tok, opts...); err != nil {
		switch {
		case errors.Is(err, jwt.TokenExpiredError()):
			return invalid("token expired")
		case errors.Is(err, jwt.TokenNotYetValidError()):
			return invalid("token not yet valid")
		case errors.Is(err, jwt.InvalidIssuedAtError()):
			return invalid("token issued in the future")
		case errors.Is(err, jwt.InvalidIssuerError()):
			return invalid("wrong issuer")
		case errors.Is(err, jwt.MissingRequiredClaimError()):
			return invalid("token has no expiry (exp)")
		}
		return invalid("invalid token claims")
	}
	return nil
}

// principal reads the principal id and permissions of a valid token.
func (v *Verifier) principal(tok jwt.Token) (*auth.Principal, error) {
	var id any
	if err := tok.Get(v.cfg.PrincipalClaim, &id); err != nil {
		return nil, invalid("token has no " + v.cfg.PrincipalClaim + " claim")
	}
	sid, ok := id.(string)
	if !ok || sid == "" {
		return nil, invalid("token's " + v.cfg.PrincipalClaim + " claim is not a string")
	}
	if hasControl(sid) {
		// The id is stamped on events and written to logs.
		return nil, invalid("token's " + v.cfg.PrincipalClaim + " claim is malformed")
	}
	if auth.Reserved(sid) {
		// Herald's own principals (the development token's) cannot be
		// claimed by a token: see auth.ReservedPrincipalPrefix.
		return nil, invalid("token's " + v.cfg.PrincipalClaim + " claim is reserved")
	}
	claims := []string{v.cfg.PermissionsClaim}
	if v.cfg.PermissionsClaim == DefaultPermissionsClaim {
		claims = append(claims, "scp")
	}
	var perms []string
	for _, c := range claims {
		var raw any
		if tok.Get(c, &raw) != nil {
			continue
		}
		got, err := v.permissions(raw)
		if err != nil {
			return nil, err
		}
		perms = append(perms, got...)
	}
	perms = append(perms, v.cfg.Grants[sid]...)
	slices.Sort(perms)
	return &auth.Principal{ID: sid, Permissions: slices.Compact(perms)}, nil
}

// permissions reads one claim's value: a string of values separated by
// spaces (U+0020 only: the scope claim of RFC 8693, section 4.2, whose
// values are RFC 6749's scope-tokens) or an array of strings, each one
// value taken as it is. A value holding a control character is refused
// (herr.Unauthenticated, "malformed permissions claim") rather than read:
// were tabs or line breaks separators, "x\t*" would grant "*". Values
// that are no permission are dropped.
func (v *Verifier) permissions(raw any) ([]string, error) {
	var values []string
	switch x := raw.(type) {
	case string:
		values = strings.Split(x, " ")
	case []any:
		for _, e := range x {
			if s, ok := e.(string); ok {
				values = append(values, s)
			}
		}
	case []string:
		values = x
	}
	for _, s := range values {
		if hasControl(s) {
			return nil, invalid("malformed permissions claim")
		}
	}
	var out []string
	for _, s := range values {
		if v.cfg.ScopePrefix != "" {
			var ok bool
			if s, ok = strings.CutPrefix(s, v.cfg.ScopePrefix); !ok {
				continue
			}
		}
		if auth.Known(s) {
			out = append(out, s)
		}
	}
	return out, nil
}

// hasControl reports whether s holds a control character: C0 (tab and
// line breaks included), DEL or C1.
func hasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}

// fits reports whether key k may verify a signature made with alg: a
// signing key of alg's type whose own alg, if published, is alg.
func fits(alg jwa.SignatureAlgorithm, k jwk.Key) bool {
	if use, ok := k.KeyUsage(); ok && use != "sig" {
		return false
	}
	if ka, ok := k.Algorithm(); ok && ka.String() != alg.String() {
		return false
	}
	name := alg.String()
	switch {
	case strings.HasPrefix(name, "RS"), strings.HasPrefix(name, "PS"):
		return k.KeyType() == jwa.RSA()
	case strings.HasPrefix(name, "ES"):
		return k.KeyType() == jwa.EC()
	case name == jwa.EdDSA().String():
		return k.KeyType() == jwa.OKP()
	}
	return false
}

// LooksLikeJWT reports whether token has the shape of a JWS in compact
// serialization: three base64url parts separated by dots. A static token
// of that shape is looked up before it is verified as a JWT.
func LooksLikeJWT(token string) bool {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" {
		return false
	}
	for _, p := range parts {
		for _, r := range p {
			if !(r >= 'A' && r <= 'Z' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' || r == '_') {
				return false
			}
		}
	}
	return true
}
