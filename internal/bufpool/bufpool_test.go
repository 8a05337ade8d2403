package bufpool

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGetCapacity(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, 4096, 4097, 100_000, 1 << 23, 1<<23 + 1} {
		b := Get(n)
		require.Zero(t, len(*b))
		require.GreaterOrEqual(t, cap(*b), n)
		*b = append(*b, "x"...)
		Put(b)
	}
}

func TestPutKeepsWhatItCovers(t *testing.T) {
	t.Parallel()
	// A buffer grown past its class is kept under the class it covers, so
	// a Get from that class is never short.
	b := make([]byte, 0, 3*4096)
	Put(&b)
	for range 10 {
		g := Get(2 * 4096)
		require.GreaterOrEqual(t, cap(*g), 2*4096)
	}
	Put(nil)
	small := make([]byte, 0, 100)
	Put(&small) // below the smallest class: dropped
	huge := make([]byte, 0, 1<<24)
	Put(&huge) // above the biggest: dropped
}

func TestClass(t *testing.T) {
	t.Parallel()
	require.Equal(t, 0, class(1))
	require.Equal(t, 0, class(4096))
	require.Equal(t, 1, class(4097))
	require.Equal(t, 1, class(8192))
	require.Equal(t, maxShift-minShift, class(1<<maxShift))
	require.Equal(t, -1, class(1<<maxShift+1))
}
