package delivery_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/delivery"
)

// TestStreamConfigAutoAck: AutoAckDelay 0 takes DefaultAutoAckDelay, a
// set delay stays, and AutoAckAtOnce makes it 0 (HERALD_SSE_ACK_DELAY=0s).
func TestStreamConfigAutoAck(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		in   delivery.StreamConfig
		want time.Duration
	}{
		"default":      {delivery.StreamConfig{}, delivery.DefaultAutoAckDelay},
		"set":          {delivery.StreamConfig{AutoAckDelay: 3 * time.Second}, 3 * time.Second},
		"at once":      {delivery.StreamConfig{AutoAckAtOnce: true}, 0},
		"at once wins": {delivery.StreamConfig{AutoAckDelay: time.Hour, AutoAckAtOnce: true}, 0},
	} {
		t.Run(name, func(t *testing.T) {
			svc := delivery.New(delivery.Config{Streams: tc.in})
			require.Equal(t, tc.want, svc.Streams().AutoAckDelay)
		})
	}
}
