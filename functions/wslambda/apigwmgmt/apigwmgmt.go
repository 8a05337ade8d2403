// Package apigwmgmt is a small client of the API Gateway management API
// (service "execute-api"), the API a WebSocket backend uses to answer its
// clients: PostToConnection, DeleteConnection and GetConnection.
//
// The AWS SDK's apigatewaymanagementapi module is not used because this
// project's module proxy does not carry it; the three calls are plain
// REST calls signed with SigV4 (aws-sdk-go-v2/aws/signer/v4), which is all
// the SDK client does:
//
//	POST   {endpoint}/@connections/{connectionId}   body: the message bytes
//	DELETE {endpoint}/@connections/{connectionId}
//	GET    {endpoint}/@connections/{connectionId}
//
// The endpoint is https://{domainName}/{stage} of the WebSocket event's
// requestContext, as AWS documents for the management API ("Use
// @connections commands in your backend service"), unless the standard
// SDK variable AWS_ENDPOINT_URL_APIGATEWAYMANAGEMENTAPI overrides it (the
// SDK's service-specific endpoint convention; tests point it at the local
// emulator, package local/apigwws). The override is the whole base
// endpoint, stage path included (as the SDK client's BaseEndpoint is).
// The global AWS_ENDPOINT_URL is deliberately not honoured: it usually
// points at a DynamoDB or SNS emulator that has no management API.
//
// A connection id is escaped in the path: API Gateway ids end in '=',
// which is sent as %3D, as the SDK does.
package apigwmgmt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/heraldevents/herald/herr"
)

// EnvEndpoint is the SDK's service-specific endpoint variable of the
// management API; when set it replaces https://{domainName}/{stage}.
const EnvEndpoint = "AWS_ENDPOINT_URL_APIGATEWAYMANAGEMENTAPI"

// SigningName is the SigV4 service name of the management API.
const SigningName = "execute-api"

// MaxMessageBytes is the largest message PostToConnection accepts: API
// Gateway's WebSocket message limit, 128 KiB (frames of 32 KiB each).
const MaxMessageBytes = 128 << 10

// ErrGone is wrapped by the error of a call on a connection API Gateway
// no longer has (HTTP 410 GoneException): the client left. Its herr code
// is herr.NotFound. Treat it as a disconnect.
var ErrGone = errors.New("the WebSocket connection is gone (410)")

// APIError is a non-2xx answer of the management API other than 410.
type APIError struct {
	// Status is the HTTP status; Type the error type API Gateway named
	// (x-amzn-ErrorType or the body's "message"), when it named one.
	Status int
	Type   string
}

// Error says the status and, when known, the error type; never the body
// Herald posted.
func (e *APIError) Error() string {
	if e.Type != "" {
		return fmt.Sprintf("API Gateway management API: HTTP %d (%s)", e.Status, e.Type)
	}
	return fmt.Sprintf("API Gateway management API: HTTP %d", e.Status)
}

// Client calls one endpoint of the management API. The zero value is not
// usable; fill Endpoint, Region and Credentials (New does).
type Client struct {
	// Endpoint is the base URL, e.g.
	// https://abc123.execute-api.us-east-1.amazonaws.com/prod (no trailing
	// slash).
	Endpoint string
	// Region is the signing region (the API's region).
	Region string
	// Credentials sign every request.
	Credentials aws.CredentialsProvider
	// HTTPClient defaults to a client with a 10-second timeout.
	HTTPClient *http.Client
	// Now is the signing clock (default time.Now).
	Now func() time.Time

	signer *v4.Signer
	once   sync.Once
}

var defaultHTTP = &http.Client{Timeout: 10 * time.Second}

// Endpoint returns the management API base URL for a WebSocket event's
// requestContext.domainName and stage: the override in
// AWS_ENDPOINT_URL_APIGATEWAYMANAGEMENTAPI (through lookup, os.LookupEnv in
// production) when set, else https://{domainName}/{stage}. An empty
// domainName without an override is herr.FailedPrecondition.
func Endpoint(domainName, stage string, lookup func(string) (string, bool)) (string, error) {
	if lookup != nil {
		if v, ok := lookup(EnvEndpoint); ok && strings.TrimSpace(v) != "" {
			return strings.TrimRight(strings.TrimSpace(v), "/"), nil
		}
	}
	if domainName == "" {
		return "", herr.New(herr.FailedPrecondition, "the WebSocket event has no requestContext.domainName and %s is unset: no management API endpoint", EnvEndpoint)
	}
	u := "https://" + domainName
	if stage != "" && stage != "$default" {
		u += "/" + stage
	}
	return u, nil
}

// RegionOf returns the region of an execute-api domain name
// ("abc123.execute-api.us-east-1.amazonaws.com" → "us-east-1"), or "".
func RegionOf(domainName string) string {
	parts := strings.Split(domainName, ".")
	for i := 0; i+1 < len(parts); i++ {
		if parts[i] == "execute-api" {
			return parts[i+1]
		}
	}
	return ""
}

// PostToConnection sends data to the connection as one message (a text
// frame). A gone connection is ErrGone; data over MaxMessageBytes is
// herr.InvalidArgument and nothing is sent.
func (c *Client) PostToConnection(ctx context.Context, connectionID string, data []byte) error {
	if len(data) > MaxMessageBytes {
		return herr.New(herr.InvalidArgument, "a WebSocket message must be at most %d bytes, this one is %d", MaxMessageBytes, len(data))
	}
	_, err := c.do(ctx, http.MethodPost, connectionID, data)
	return err
}

// DeleteConnection disconnects the client. A connection that is already
// gone is ErrGone.
func (c *Client) DeleteConnection(ctx context.Context, connectionID string) error {
	_, err := c.do(ctx, http.MethodDelete, connectionID, nil)
	return err
}

// ConnectionInfo is GetConnection's answer.
type ConnectionInfo struct {
	ConnectedAt  time.Time `json:"connectedAt"`
	LastActiveAt time.Time `json:"lastActiveAt"`
	Identity     struct {
		SourceIP  string `json:"sourceIp"`
		UserAgent string `json:"userAgent"`
	} `json:"identity"`
}

// GetConnection returns what API Gateway knows of the connection; a gone
// one is ErrGone.
func (c *Client) GetConnection(ctx context.Context, connectionID string) (*ConnectionInfo, error) {
	b, err := c.do(ctx, http.MethodGet, connectionID, nil)
	if err != nil {
		return nil, err
	}
	var info ConnectionInfo
	if err := json.Unmarshal(b, &info); err != nil {
		return nil, herr.Wrap(herr.Unavailable, err, "the management API answered GetConnection with a body that is not its JSON shape")
	}
	return &info, nil
}

// escapeID escapes every byte of id that is not unreserved (RFC 3986
// §2.3), so "abc=" becomes "abc%3D" as the SDK sends it.
func escapeID(id string) string {
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		ch := id[i]
		if ch >= 'A' && ch <= 'Z' || ch >= 'a' && ch <= 'z' || ch >= '0' && ch <= '9' || ch == '-' || ch == '_' || ch == '.' || ch == '~' {
			b.WriteByte(ch)
		} else {
			fmt.Fprintf(&b, "%%%02X", ch)
		}
	}
	return b.String()
}

// URL returns the request URL of connectionID.
func (c *Client) URL(connectionID string) (*url.URL, error) {
	u, err := url.Parse(c.Endpoint + "/@connections/" + escapeID(connectionID))
	if err != nil {
		return nil, herr.Wrap(herr.FailedPrecondition, err, "the management API endpoint is not a URL")
	}
	return u, nil
}

func (c *Client) do(ctx context.Context, method, connectionID string, body []byte) ([]byte, error) {
	if connectionID == "" {
		return nil, herr.New(herr.InvalidArgument, "a connection id is required")
	}
	c.once.Do(func() { c.signer = v4.NewSigner() })
	u, err := c.URL(connectionID)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), bytes.NewReader(body))
	if err != nil {
		return nil, herr.Wrap(herr.Internal, err, "cannot build a management API request")
	}
	if body == nil {
		req.Body, req.ContentLength = http.NoBody, 0
	}
	sum := sha256.Sum256(body)
	if c.Credentials == nil {
		return nil, herr.New(herr.FailedPrecondition, "no AWS credentials to sign management API calls with")
	}
	creds, err := c.Credentials.Retrieve(ctx)
	if err != nil {
		return nil, herr.Wrap(herr.Unavailable, err, "cannot retrieve AWS credentials")
	}
	now := time.Now
	if c.Now != nil {
		now = c.Now
	}
	if err := c.signer.SignHTTP(ctx, creds, req, hex.EncodeToString(sum[:]), SigningName, c.Region, now()); err != nil {
		return nil, herr.Wrap(herr.Internal, err, "cannot sign a management API request")
	}
	hc := c.HTTPClient
	if hc == nil {
		hc = defaultHTTP
	}
	res, err := hc.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, herr.Wrap(herr.Canceled, err, "the management API call was cancelled")
		}
		return nil, herr.Wrap(herr.Unavailable, err, "the API Gateway management API cannot be reached")
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode/100 == 2 {
		return b, nil
	}
	if res.StatusCode == http.StatusGone {
		return nil, herr.Wrap(herr.NotFound, ErrGone, "the WebSocket connection is gone")
	}
	apiErr := &APIError{Status: res.StatusCode, Type: errorType(res, b)}
	code := herr.Unknown
	switch {
	case res.StatusCode == http.StatusTooManyRequests || res.StatusCode >= 500:
		code = herr.Unavailable
	case res.StatusCode == http.StatusForbidden || res.StatusCode == http.StatusUnauthorized:
		code = herr.PermissionDenied
	case res.StatusCode == http.StatusRequestEntityTooLarge || res.StatusCode == http.StatusBadRequest:
		code = herr.InvalidArgument
	}
	return nil, herr.Wrap(code, apiErr, apiErr.Error())
}

// errorType reads the error type of a failed call, bounded and without
// quoting anything but the type name.
func errorType(res *http.Response, body []byte) string {
	t := res.Header.Get("X-Amzn-Errortype")
	if i := strings.IndexByte(t, ':'); i >= 0 {
		t = t[:i]
	}
	if t == "" {
		var m struct {
			Type    string `json:"__type"`
			Message string `json:"message"`
		}
		if json.Unmarshal(body, &m) == nil {
			t = m.Type
			if t == "" {
				t = m.Message
			}
		}
	}
	if len(t) > 100 {
		t = t[:100]
	}
	return t
}

// Factory makes Clients for the endpoints WebSocket events name, sharing
// one credentials provider and HTTP client; a Client per endpoint is kept.
type Factory struct {
	// Region is the signing region when the domain name does not say one
	// (a custom domain, the emulator); Lambda sets AWS_REGION.
	Region      string
	Credentials aws.CredentialsProvider
	HTTPClient  *http.Client
	// Lookup reads AWS_ENDPOINT_URL_APIGATEWAYMANAGEMENTAPI (os.LookupEnv
	// in production; nil reads nothing).
	Lookup func(string) (string, bool)

	mu      sync.Mutex
	clients map[string]*Client
}

// NewFactory returns a Factory over an AWS SDK configuration (from
// aws-sdk-go-v2/config.LoadDefaultConfig: region and credentials).
func NewFactory(cfg aws.Config, lookup func(string) (string, bool)) *Factory {
	return &Factory{Region: cfg.Region, Credentials: cfg.Credentials, HTTPClient: nil, Lookup: lookup}
}

// For returns the Client of the endpoint a WebSocket event names.
func (f *Factory) For(domainName, stage string) (*Client, error) {
	ep, err := Endpoint(domainName, stage, f.Lookup)
	if err != nil {
		return nil, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if c, ok := f.clients[ep]; ok {
		return c, nil
	}
	region := RegionOf(domainName)
	if region == "" {
		region = f.Region
	}
	if region == "" {
		region = "us-east-1"
	}
	c := &Client{Endpoint: ep, Region: region, Credentials: f.Credentials, HTTPClient: f.HTTPClient}
	if f.clients == nil {
		f.clients = map[string]*Client{}
	}
	f.clients[ep] = c
	return c, nil
}
