package health

import (
	"net/http"

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/functions/httpx"
	"github.com/heraldevents/herald/internal/version"
)

// InfoPath is the configuration summary: GET /v1/info, for operators
// (the console's health page).
const InfoPath = "/v1/info"

// Summary is what a deployment runs with, as the start-up log line tells
// it: never a credential. URLs are cut to their scheme (a broker or
// store URL may hold a password), tokens are counted, the identity
// provider's issuer is public.
type Summary struct {
	// Version is the build's version; Commit and Date where stamped.
	Version version.Info `json:"version"`
	// Profile is the entrypoint: "local", "cloudrun" or "lambda".
	Profile string `json:"profile"`
	// Function is HERALD_FUNCTION: the routes this process serves.
	Function string `json:"function"`
	// Broker and Store are the schemes of HERALD_TOPIC_URL and
	// HERALD_STORE_URL ("mem", "postgres", "awssnssqs", …); "" when the
	// function uses none.
	Broker string `json:"broker,omitempty"`
	Store  string `json:"store,omitempty"`
	// Auth names the kinds of bearer token accepted (config.AuthMode).
	Auth string `json:"auth"`
	// ConsoleSignIn is how the web console signs in: "off" (no console),
	// "token", or "token, oidc".
	ConsoleSignIn string `json:"console_sign_in"`
	// Telemetry names the OpenTelemetry exporters, or "off".
	Telemetry string `json:"telemetry"`
}

// InfoHandler serves GET /v1/info: Summary, to a principal holding
// manage:destinations (the operator's permission: the summary holds no
// secret, but it tells how the deployment is built, which a publisher
// or consumer has no need to know).
type InfoHandler struct {
	// Summary returns the summary; nil answers 404.
	Summary func() Summary
}

// ServeHTTP implements http.Handler.
func (h InfoHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	httpx.Endpoint(func(_ http.ResponseWriter, r *http.Request, p *auth.Principal) (httpx.Answer, error) {
		if err := p.Require(auth.PermManageDestinations); err != nil {
			return httpx.Answer{}, err
		}
		if h.Summary == nil {
			return httpx.Answer{Status: http.StatusOK, Body: Summary{Version: version.Get(), Auth: "unknown", ConsoleSignIn: "unknown", Telemetry: "unknown"}}, nil
		}
		return httpx.Answer{Status: http.StatusOK, Body: h.Summary()}, nil
	})(w, r)
}
