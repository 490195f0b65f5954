// Package static holds the console's and the shop's assets — the
// stylesheet and a pinned htmx — embedded in the binary. Each is served
// under a name that carries a hash of its content, so browsers may keep
// it for a year and still never run an old copy after an upgrade.
package static

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
)

//go:embed *.css *.js *.svg
var files embed.FS

// Prefix is the URL path the assets are served under.
const Prefix = "/static/"

var (
	byName = map[string]string{} // "style.css" → "/static/style.3f2a9c1b.css"
	byPath = map[string]string{} // "style.3f2a9c1b.css" → "style.css"
)

func init() {
	entries, err := fs.ReadDir(files, ".")
	if err != nil {
		panic(err)
	}
	for _, e := range entries {
		b, err := files.ReadFile(e.Name())
		if err != nil {
			panic(err)
		}
		sum := sha256.Sum256(b)
		ext := path.Ext(e.Name())
		hashed := strings.TrimSuffix(e.Name(), ext) + "." + hex.EncodeToString(sum[:4]) + ext
		byName[e.Name()] = Prefix + hashed
		byPath[hashed] = e.Name()
	}
}

// Path returns the URL of the asset name ("style.css"). It panics on a
// name that is not embedded: a typo shows in the first test that renders
// the page.
func Path(name string) string {
	p, ok := byName[name]
	if !ok {
		panic("static: no asset " + name)
	}
	return p
}

// Handler serves the assets under their hashed names, cached for a year.
// Any other name is a 404.
func Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name, ok := byPath[strings.TrimPrefix(r.URL.Path, Prefix)]
		if !ok {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		http.ServeFileFS(w, r, files, name)
	})
}
