package mem_test

import (
	"context"
	"testing"
	"time"

	"github.com/heraldevents/herald/pubsubx/mem"
)

func TestPingFailsOnceClosed(t *testing.T) {
	b := mem.New(time.Minute)
	p := b
	if err := p.Ping(context.Background()); err != nil {
		t.Fatalf("Ping on an open broker: %v", err)
	}
	b.Close()
	if err := p.Ping(context.Background()); err == nil {
		t.Fatal("Ping on a closed broker succeeded")
	}
}
