//go:build !herald_aws && !herald_gcp

package app_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/pubsubx"
)

// TestEveryDriverIsLinked finds every driver package under pubsubx/ and
// checks that the default build registers its scheme. It is built for the
// default build only, like drivers_all.go; TestSchemes checks the slim
// builds.
func TestEveryDriverIsLinked(t *testing.T) {
	t.Parallel()
	for _, s := range driverSchemes(t) {
		require.Contains(t, pubsubx.Schemes(), s, "driver %s is imported by functions/app/drivers_all.go", s)
	}
}
