// Package local is Herald's local adapter: every function on one port, over
// in-memory drivers by default or any supported broker and store URL.
//
// It is also a library for users' tests: Start runs an in-process Herald on
// a free loopback port and stops it when the test ends, the way pstest or
// miniredis serve theirs.
//
//	func TestMyConsumer(t *testing.T) {
//		h := local.Start(t)
//		req, _ := http.NewRequest("POST", h.URL+"/api/v1beta/events", body)
//		req.Header.Set("Authorization", "Bearer "+h.Token)
//		…
//	}
package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"gocloud.dev/docstore"
	_ "gocloud.dev/docstore/memdocstore" // mem:// store URLs

	"github.com/heraldevents/herald/auth"
	"github.com/heraldevents/herald/delivery"
	"github.com/heraldevents/herald/functions/router"
	"github.com/heraldevents/herald/leasestore"
	"github.com/heraldevents/herald/pubsubx"
	_ "github.com/heraldevents/herald/pubsubx/mem" // mem:// topic URLs
)

// Defaults of the local adapter (README "Configuration").
const (
	DefaultAddr     = "127.0.0.1:8080"
	DefaultDevToken = "dev-token"
	DefaultTopicURL = "mem://herald"
	DefaultStoreURL = "mem://herald/key"
)

// Config configures a Server. Zero fields take the defaults above.
type Config struct {
	Addr     string // HERALD_ADDR
	DevToken string // HERALD_DEV_TOKEN: grants every permission
	TopicURL string // HERALD_TOPIC_URL: a pubsubx broker URL
	StoreURL string // HERALD_STORE_URL: a gocloud docstore collection URL keyed by "key"
	Source   string // HERALD_SOURCE: CloudEvents source of published events
	// Now, if set, replaces the clock of the lease store and publisher.
	Now    func() time.Time
	Logger *slog.Logger
}

// ConfigFromEnv reads the HERALD_* variables.
func ConfigFromEnv() Config {
	return Config{
		Addr:     os.Getenv("HERALD_ADDR"),
		DevToken: os.Getenv("HERALD_DEV_TOKEN"),
		TopicURL: os.Getenv("HERALD_TOPIC_URL"),
		StoreURL: os.Getenv("HERALD_STORE_URL"),
		Source:   os.Getenv("HERALD_SOURCE"),
	}
}

func (c *Config) setDefaults() {
	if c.Addr == "" {
		c.Addr = DefaultAddr
	}
	if c.DevToken == "" {
		c.DevToken = DefaultDevToken
	}
	if c.TopicURL == "" {
		c.TopicURL = DefaultTopicURL
	}
	if c.StoreURL == "" {
		c.StoreURL = DefaultStoreURL
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
}

// Server is a running local Herald: its broker, store and handler.
type Server struct {
	cfg     Config
	broker  pubsubx.Broker
	coll    *docstore.Collection
	handler http.Handler
}

// New opens the broker and store and builds the handler. Bad configuration
// fails with a message naming the variable.
func New(ctx context.Context, cfg Config) (*Server, error) {
	cfg.setDefaults()
	broker, err := pubsubx.Open(ctx, cfg.TopicURL)
	if err != nil {
		return nil, fmt.Errorf("HERALD_TOPIC_URL: %w", err)
	}
	coll, err := docstore.OpenCollection(ctx, cfg.StoreURL)
	if err != nil {
		_ = broker.Close()
		return nil, fmt.Errorf("HERALD_STORE_URL: %w", err)
	}
	store := leasestore.New(coll, leasestore.Options{Now: cfg.Now})
	svc := delivery.New(delivery.Config{
		Broker: broker, Store: store, Source: cfg.Source, Now: cfg.Now, Logger: cfg.Logger,
	})
	return &Server{cfg: cfg, broker: broker, coll: coll, handler: router.New(svc, auth.DevToken(cfg.DevToken))}, nil
}

// Handler returns the handler serving every endpoint.
func (s *Server) Handler() http.Handler { return s.handler }

// Close releases the broker and the store (saving a file-backed store).
func (s *Server) Close() error {
	return errors.Join(s.broker.Close(), s.coll.Close())
}

// ListenAndServe serves on cfg.Addr until ctx is done, then shuts down
// gracefully.
func (s *Server) ListenAndServe(ctx context.Context) error {
	ln, err := net.Listen("tcp", s.cfg.Addr)
	if err != nil {
		return fmt.Errorf("HERALD_ADDR: %w", err)
	}
	return s.Serve(ctx, ln)
}

// Serve serves on ln until ctx is done.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{Handler: s.handler, ReadHeaderTimeout: 10 * time.Second}
	if s.cfg.DevToken == DefaultDevToken {
		s.cfg.Logger.Warn("HERALD_DEV_TOKEN is not set: the default token \"dev-token\" grants every permission; use it only on this machine")
	}
	s.cfg.Logger.Info("herald listening", "addr", "http://"+ln.Addr().String(), "topic", redactURL(s.cfg.TopicURL), "store", redactURL(s.cfg.StoreURL))
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return srv.Shutdown(shutdownCtx)
}

// redactURL drops user info and query from a URL for logging.
func redactURL(u string) string {
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
