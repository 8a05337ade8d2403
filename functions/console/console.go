// Package console serves Herald's web console: a few static pages
// (HTML, one ES module, one style sheet) embedded in the binary, so that
// nothing is fetched from elsewhere at run time and the console works
// offline.
//
// The console is one more client of Herald's REST API: the page signs in
// with a bearer token that the operator pastes (kept in the browser's
// session storage, never in a URL or a cookie), or through the identity
// provider (package functions/consoleauth: a sealed HttpOnly session
// cookie plus a CSRF header), and calls the same routes every client
// calls, with the same permission checks. The assets hold no data and
// need no token; what they show comes from the API. A pasted token
// travels in an Authorization header set by script, so a cross-site
// request cannot act with it; a session cookie is refused without its
// CSRF token in a header no other site can read or send.
//
// Every answer carries a strict Content-Security-Policy (no inline
// script or style, nothing from another origin, connections only to the
// serving origin) and refuses framing (frame-ancestors 'none' and
// X-Frame-Options DENY), against clickjacking.
package console

import (
	"embed"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

// Path is where the console is served: GET /console/ and the assets below
// it; GET /console redirects there.
const Path = "/console/"

// ContentSecurityPolicy is the policy of every console answer: scripts,
// styles, images and connections from the serving origin only, no
// plugins, no framing, forms posting nowhere else, no <base> rewriting.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
	"base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

//go:embed assets
var assets embed.FS

// Handler serves the console's assets below Path. Any other file below
// Path answers the console's page, so that a reload of a deep link works.
type Handler struct{}

// files is the assets directory as the root of the console.
var files = func() fs.FS {
	sub, err := fs.Sub(assets, "assets")
	if err != nil {
		panic(err) // the embed pattern above guarantees the directory
	}
	return sub
}()

// contentTypes gives the type of each asset kind the console ships.
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
}

// ServeHTTP answers GET and HEAD requests below Path.
func (Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", ContentSecurityPolicy)
	h.Set("X-Frame-Options", "DENY")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == strings.TrimSuffix(Path, "/") {
		http.Redirect(w, r, Path, http.StatusMovedPermanently)
		return
	}
	name := strings.TrimPrefix(path.Clean(r.URL.Path), strings.TrimSuffix(Path, "/"))
	name = strings.TrimPrefix(name, "/")
	ct, known := contentTypes[path.Ext(name)]
	body, err := fs.ReadFile(files, name)
	if name == "" || !known || err != nil {
		name, ct = "index.html", contentTypes[".html"]
		body, err = fs.ReadFile(files, name)
		if err != nil {
			http.Error(w, "console assets missing", http.StatusInternalServerError)
			return
		}
	}
	h.Set("Content-Type", ct)
	// The assets change with the binary only; a short cache keeps a
	// console open across an upgrade from running stale code for long.
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if r.Method == http.MethodGet {
		_, _ = w.Write(body)
	}
}
