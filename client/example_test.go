package client_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"os"
	"testing"
	"time"

	"github.com/heraldevents/herald/client"
	"github.com/heraldevents/herald/local"
)

// heraldURL and heraldToken name the Herald the examples talk to, which
// TestMain starts in-process (local.Start needs a *testing.T, which
// examples do not have).
var heraldURL, heraldToken string

func TestMain(m *testing.M) {
	ctx, cancel := context.WithCancel(context.Background())
	cfg := local.DefaultConfig()
	cfg.DevToken, cfg.TopicURL, cfg.StoreURL = "example-token", "mem://herald-examples", "mem://herald-examples/key"
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	srv, err := local.New(ctx, cfg)
	if err != nil {
		log.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		log.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	heraldURL, heraldToken = "http://"+ln.Addr().String(), "example-token"
	code := m.Run()
	cancel()
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Print(err)
	}
	_ = srv.Close()
	os.Exit(code)
}

func ExampleClient_Publish() {
	c, err := client.New(heraldURL, client.WithToken(heraldToken))
	if err != nil {
		log.Fatal(err)
	}
	e, err := client.NewEvent("myapp.user.created", "/users/123", map[string]string{"user_id": "123"})
	if err != nil {
		log.Fatal(err)
	}
	res, err := c.Publish(context.Background(), e)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(res.Success, res.Event.Type(), res.Event.Subject())
	// Output: true myapp.user.created /users/123
}

// A pull worker: two workers lease batches of the durable consumer and
// acknowledge each one ok when the handler returns nil. Cancelling the
// context stops them gracefully.
func ExampleClient_Consume() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	c, err := client.New(heraldURL, client.WithToken(heraldToken))
	if err != nil {
		log.Fatal(err)
	}
	d, err := c.CreateConsumer(ctx, []client.FilterGroup{{EventType: "shop.order.placed"}})
	if err != nil {
		log.Fatal(err)
	}
	e, _ := client.NewEvent("shop.order.placed", "/orders/42", map[string]int{"total": 99})
	if _, err := c.Publish(ctx, e); err != nil {
		log.Fatal(err)
	}

	err = c.Consume(ctx, d.ID, func(ctx context.Context, l *client.Lease) error {
		for _, ev := range l.Events {
			fmt.Println(ev.Type(), ev.Subject())
		}
		stop() // one batch is enough here; a service runs until it is told to stop
		return nil
	}, client.ConsumeOptions{Workers: 2, Limit: 10, Visibility: 30 * time.Second})
	if err != nil {
		log.Fatal(err)
	}
	// Output: shop.order.placed /orders/42
}

// Stream a durable queue over gRPC: nil acknowledges an event, an error
// nacks it.
func ExampleClient_Stream() {
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	c, err := client.New(heraldURL, client.WithToken(heraldToken))
	if err != nil {
		log.Fatal(err)
	}
	q, err := c.EnsureQueue(ctx, "example-invoices", []client.FilterGroup{{EventType: "billing.invoice.paid"}})
	if err != nil {
		log.Fatal(err)
	}
	e, _ := client.NewEvent("billing.invoice.paid", "", map[string]string{"invoice": "A-1"})
	if _, err := c.Publish(ctx, e); err != nil {
		log.Fatal(err)
	}
	err = c.Stream(ctx, q.ID, func(ctx context.Context, d *client.Delivery) error {
		fmt.Println(d.Event.Type, string(d.Event.Message))
		stop()
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Output: billing.invoice.paid {"invoice":"A-1"}
}
