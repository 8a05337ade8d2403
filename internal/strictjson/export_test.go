package strictjson

// CheckObjectTokens exposes the token-by-token scan to the tests, which
// hold the quick path to it.
var CheckObjectTokens = checkObjectTokens
