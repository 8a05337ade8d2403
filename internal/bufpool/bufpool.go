// Package bufpool lends the byte buffers of Herald's hot requests and
// answers (a publish batch's body and its answer, a pull's answer: about
// a hundred kilobytes each at 100 events) so that they are not allocated
// afresh for every request. A fresh buffer that size is zeroed and, as
// the heap grows and the runtime hands memory back to the system, often
// faults its pages in again: in the profile of a server under load that
// was a tenth of its CPU, spent copying events into new answers.
//
// Buffers are kept by size class, powers of two from 4 KiB to 8 MiB;
// Get of more than that allocates, and Put of such a buffer drops it.
package bufpool

import (
	"math/bits"
	"sync"
)

const (
	minShift = 12 // 4 KiB
	maxShift = 23 // 8 MiB
)

var pools [maxShift - minShift + 1]sync.Pool

// Get returns an empty buffer whose capacity is at least n. Give it back
// with Put once nothing refers to its bytes any more.
func Get(n int) *[]byte {
	c := class(n)
	if c < 0 {
		b := make([]byte, 0, n)
		return &b
	}
	if p, ok := pools[c].Get().(*[]byte); ok {
		*p = (*p)[:0]
		return p
	}
	b := make([]byte, 0, 1<<(c+minShift))
	return &b
}

// Put gives b back for a later Get. The caller must not use b, nor any
// slice of its bytes, afterwards. A nil b, or one of a capacity Get does
// not pool, is dropped.
func Put(b *[]byte) {
	if b == nil {
		return
	}
	n := cap(*b)
	if n > 1<<maxShift {
		return
	}
	c := class(n)
	if c < 0 || 1<<(c+minShift) != n {
		// Not a pooled size (grown by append past its class, say): keep
		// it under the class it fully covers.
		c = bits.Len(uint(n)) - 1 - minShift
		if c < 0 || c >= len(pools) {
			return
		}
	}
	*b = (*b)[:0]
	pools[c].Put(b)
}

// class is the index of the smallest class holding n bytes, or -1 when n
// is bigger than the biggest.
func class(n int) int {
	if n <= 1<<minShift {
		return 0
	}
	c := bits.Len(uint(n-1)) - minShift
	if c >= len(pools) {
		return -1
	}
	return c
}
