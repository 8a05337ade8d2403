// Package jwtauth verifies JWT bearer tokens (OAuth 2.0 access tokens and
// OpenID Connect ID tokens) against the signing keys an issuer publishes,
// and turns a valid token into an auth.Principal. docs/auth.md is the
// operator's guide; this comment says what the code holds to.
//
// # Library
//
// Parsing, signature verification and the registered-claim checks are
// github.com/lestrrat-go/jwx/v3; the key set is a jwk.Cache (built on
// github.com/lestrrat-go/httprc/v3). jwx was chosen over
// github.com/coreos/go-oidc/v3 because Herald needs three things go-oidc
// does not give: the key set's Cache-Control / Expires headers decide when
// it is fetched again (go-oidc's RemoteKeySet refetches when a token's
// key is missing from its cache and does not read those headers); validation failures are typed errors
// (jwt.TokenExpiredError, jwt.InvalidIssuerError, …), so a 401 can say
// "token expired" or "wrong issuer" without matching error strings; and
// the clock skew is a parameter (go-oidc fixes its own). go-oidc is also
// built for ID tokens, where Herald mostly sees access tokens.
//
// # What is checked
//
//   - The header's alg is one of Config.Algorithms (default: every
//     asymmetric algorithm, RS*, PS*, ES*, EdDSA) and fits the key: a key
//     of the wrong type, or whose published "alg" differs, is not used.
//     "none" and HMAC (HS*) are never accepted: a public key set cannot
//     verify them, and an HS256 token "signed" with the public key is the
//     classic confusion attack.
//   - The signature, with the key named by kid (a token without kid is
//     tried against every key that fits its alg).
//   - iss equals Config.Issuer when one is set.
//   - aud contains one of Config.Audiences; a token without aud is matched
//     on client_id instead, as API Gateway's JWT authorizer does (Amazon
//     Cognito access tokens carry client_id, not aud).
//   - exp, nbf and iat, with ClockSkew of tolerance. exp is required.
//   - The protected header has no "crit": Herald understands no JWS
//     extension, and RFC 7515 (section 4.1.11) says a recipient refuses a
//     token that lists one it does not understand.
//
// Verifier.VerifyIDToken checks an OpenID Connect ID token for the web
// console's sign-in (package functions/consoleauth) with the same keys
// and algorithm rules, but against the console's client id (aud, and azp
// when present) and the sign-in's nonce instead of Config.Audiences; iss
// must equal Config.Issuer.
//
// Every failure is herr.Unauthenticated with a short description ("token
// expired", "wrong audience", …) that never repeats the token or a claim
// value; the HTTP and gRPC layers turn it into a 401 with
// error="invalid_token" or UNAUTHENTICATED.
//
// # Keys
//
// With only Config.Issuer set, the key set's URL is the jwks_uri of
// ISSUER/.well-known/openid-configuration, whose "issuer" must equal
// Config.Issuer (OpenID Connect Discovery 1.0, section 4.3). Key sets and
// discovery documents are fetched over HTTPS; plain HTTP is allowed only
// to a loopback host (tests, a local Keycloak). Each fetch is bounded by
// FetchTimeout.
//
// The key set is cached and fetched again when its Cache-Control max-age
// (or Expires) runs out, clamped to [MinCacheInterval, MaxCacheInterval].
// A token whose kid is not in the cached set makes one fetch at once (a
// rotated key is accepted on its first use), but at most one such fetch
// runs per Config.RefreshInterval (default DefaultRefreshInterval), shared
// by every request waiting for it, so a flood of tokens with made-up kids
// cannot hammer the issuer. When the keys cannot be fetched and no cached
// key fits, Authenticate returns herr.Unavailable (HTTP 503, gRPC
// UNAVAILABLE): the token may be fine, so the caller should retry rather
// than sign in again.
//
// # Principal and permissions
//
// The principal id is the string claim Config.PrincipalClaim (default
// "sub"); a token without it is refused, and so is one whose id holds a
// control character or starts with auth.ReservedPrincipalPrefix (the
// namespace of Herald's own principals, such as the development token's
// auth.DevPrincipalID). Permissions are the values of
// Config.PermissionsClaim (default "scope"), a string of values separated
// by spaces (U+0020 only, as RFC 8693 section 4.2 defines the scope
// claim) or an array of strings taken value by value, plus those of "scp"
// (Microsoft Entra ID, Okta) when the claim is "scope". A value holding a
// control character makes the token refused ("malformed permissions
// claim"). Config.ScopePrefix, when set, is cut from the front
// of each value first (Amazon Cognito names custom scopes
// RESOURCE-SERVER/NAME). Values are read as package auth's permissions,
// with exactly the meaning they have for static tokens; values that name
// no permission ("openid", "email") grant nothing. Config.Grants adds
// permissions by principal id, for issuers that mint no scopes (Google's
// service-to-service ID tokens).
package jwtauth
