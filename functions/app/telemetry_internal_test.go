package app

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/internal/telemetry"
	"github.com/heraldevents/herald/leasestore"
)

func TestSchemeNamesTheDriverOnly(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		"mem://herald": "mem",
		"awssns:///arn:aws:sns:eu-west-1:1:t?x=1": "awssns",
		"rabbit://user:secret@host:5672/?topic=t": "rabbit",
		"user:secret@host/x":                      "unknown",
		"://x":                                    "unknown",
		"":                                        "unknown",
	} {
		require.Equal(t, want, scheme(in), in)
	}
}

func TestConsumerStatesReadTheStore(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	coll, err := openStore(ctx, "mem://app-telemetry-states/key")
	require.NoError(t, err)
	defer coll.Close()
	s := leasestore.New(coll, leasestore.Options{})
	_, err = s.CreateConsumer(ctx, leasestore.Consumer{ID: "dc", Type: leasestore.TypeDurableConsumer, Subscription: "sub"})
	require.NoError(t, err)
	got, err := consumerStates(s)(ctx)
	require.NoError(t, err)
	require.Equal(t, []telemetry.ConsumerState{{ID: "dc", Type: leasestore.TypeDurableConsumer}}, got)
}
