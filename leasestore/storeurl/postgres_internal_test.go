//go:build !herald_aws

package storeurl

import (
	"net/url"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
)

// TestPlaintextAllowed: only a URL that leaves sslmode to the default and
// names loopback hosts only connects without TLS.
func TestPlaintextAllowed(t *testing.T) {
	for raw, want := range map[string]bool{
		"postgres://u@127.0.0.1:5432/db":                  true,
		"postgres://u@localhost/db":                       true,
		"postgres://u@[::1]:5432/db":                      true,
		"postgres://u@127.0.0.1,127.0.0.2:5433/db":        true,
		"postgres://u@127.0.0.1/db?sslmode=prefer":        false,
		"postgres://u@127.0.0.1/db?sslmode=require":       false,
		"postgres://u@db.example.com/db":                  false,
		"postgres://u@10.0.0.5/db":                        false,
		"postgres://u@127.0.0.1,db.example.com:5432/db":   false,
		"postgres://u@127.0.0.1/db?sslmode=verify-full":   false,
		"postgres://u@127.0.0.1/db?application_name=hrld": true,
	} {
		u, err := url.Parse(raw)
		require.NoError(t, err)
		cfg, err := pgxpool.ParseConfig(raw)
		require.NoError(t, err)
		require.Equal(t, want, plaintextAllowed(u, cfg), raw)
	}
	t.Setenv("PGSSLMODE", "require")
	u, _ := url.Parse("postgres://u@127.0.0.1/db")
	cfg, err := pgxpool.ParseConfig(u.String())
	require.NoError(t, err)
	require.False(t, plaintextAllowed(u, cfg), "PGSSLMODE is the user's choice too")
}
