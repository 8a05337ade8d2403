//go:build !unix

package connlimit

// fdLimit is unknown here: Derived then assumes 1,024.
func fdLimit() int { return 0 }
