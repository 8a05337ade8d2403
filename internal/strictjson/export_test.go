package strictjson

// CheckObjectTokens exposes the token-by-token scan to the tests, which
// hold the quick path to it.
var CheckObjectTokens = checkObjectTokens

// PlainRun exposes the eight-bytes-at-a-time string scan, which the tests
// hold to a byte-by-byte reading of stringClass.
var PlainRun = plainRun

// IsPlain reports the byte-by-byte class PlainRun must agree with.
func IsPlain(c byte) bool { return stringClass[c] == plain }
