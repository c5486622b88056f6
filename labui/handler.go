package labui

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"html/template"
	"io"
	"io/fs"
	"net/http"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cmlab/cmlab/pagesec"
)

//go:embed assets
var assets embed.FS

// firstRowsTemplate is the runs view of a page served with its first rows
// (firstrows.go); not an asset.
//
//go:embed firstrows.html
var firstRowsTemplate string

// Options configure the page.
type Options struct {
	// Version is the daemon's version, shown in the top bar.
	Version string
}

// Handler serves the page: the shell at / and the assets under /ui/.
type Handler struct {
	shell   []byte // the page without rows
	page    *template.Template
	data    shellData
	version string // digest of the assets: the /ui/<version>/ prefix
	files   map[string][]byte
}

// shellData is what index.html shows.
type shellData struct {
	Assets, Version string
	Modules         []string
	Runs            *runsView // nil: no rows, the page asks for them
}

// New reads the embedded assets once and renders the shell.
func New(o Options) (*Handler, error) {
	h := &Handler{files: map[string][]byte{}}
	sum := sha256.New()
	names, err := fs.Glob(assets, "assets/*")
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := assets.ReadFile(n)
		if err != nil {
			return nil, err
		}
		base := path.Base(n)
		if base == "index.html" {
			continue
		}
		h.files[base] = b
		io.WriteString(sum, base)
		sum.Write(b)
	}
	h.version = hex.EncodeToString(sum.Sum(nil))[:16]
	shell, err := assets.ReadFile("assets/index.html")
	if err != nil {
		return nil, err
	}
	t, err := template.New("shell").Parse(string(shell))
	if err == nil {
		_, err = t.Parse(firstRowsTemplate)
	}
	if err != nil {
		return nil, err
	}
	// The modules of the first view (the runs list: what app.js and
	// runs.js import) are named in the shell (modulepreload), so the
	// browser fetches them at once instead of level by level of the
	// imports; the other views are imported when shown (app.js).
	var modules []string
	for _, name := range h.imports("app.js", firstView) {
		if name != "prefetch.js" { // a script of its own in the shell
			modules = append(modules, name)
		}
	}
	modules = append(modules, firstView)
	sort.Strings(modules)
	h.page, h.data = t, shellData{Assets: "/ui/" + h.version, Version: o.Version, Modules: modules}
	var buf bytes.Buffer
	if err := t.Execute(&buf, h.data); err != nil {
		return nil, err
	}
	h.shell = buf.Bytes()
	return h, nil
}

// firstView is the module of the view a bare / opens.
const firstView = "runs.js"

// staticImport is an import declaration of a sibling module at the start
// of a line (import … from './x.js', import './x.js'); a dynamic
// import('./x.js') is not one.
var staticImport = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?m)^import\s+(?:[^'"]*?\sfrom\s+)?['"]\./([a-z]+\.js)['"]`)
})

// imports is what the modules roots import, directly or not, sorted,
// without the roots themselves.
func (h *Handler) imports(roots ...string) []string {
	seen := map[string]bool{}
	todo := append([]string(nil), roots...)
	for len(todo) > 0 {
		name := todo[0]
		todo = todo[1:]
		for _, m := range staticImport().FindAllSubmatch(h.files[name], -1) {
			if dep := string(m[1]); !seen[dep] {
				seen[dep] = true
				todo = append(todo, dep)
			}
		}
	}
	for _, r := range roots {
		delete(seen, r)
	}
	out := make([]string, 0, len(seen))
	for name := range seen {
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// AssetBytes is the total size of the page's JavaScript and CSS (the
// 150 KB budget of UI.md).
func (h *Handler) AssetBytes() int {
	n := 0
	for name, b := range h.files {
		if strings.HasSuffix(name, ".js") || strings.HasSuffix(name, ".css") {
			n += len(b)
		}
	}
	return n
}

// ServeHTTP answers GET/HEAD of / and /ui/<version>/<file>; anything else
// is the plain-text 404 of every non-API path.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == "/" {
		// The shell is small and names the assets' version: never cached,
		// so a new binary's page is what a reload shows.
		h.write(w, r, "text/html; charset=utf-8", "no-store", h.shell)
		return
	}
	rest, ok := strings.CutPrefix(r.URL.Path, "/ui/")
	ver, name, ok2 := strings.Cut(rest, "/")
	b, found := h.files[name]
	if !ok || !ok2 || !found || strings.Contains(name, "/") {
		pagesec.NotFound(w)
		return
	}
	cache := "no-store"
	if ver == h.version {
		cache = "public, max-age=31536000, immutable"
	}
	h.write(w, r, pagesec.ContentType(name), cache, b)
}

// ServeWithRuns answers GET / as ServeHTTP does, with the first rows of
// runs in the page (labapi.RunsPage): runs is the body of GET
// /api/runs?limit=50&sort=newest, roots the import roots of /api/config.
// Without runs, or with runs it cannot read, the page is the one without
// rows, which asks for them itself.
func (h *Handler) ServeWithRuns(w http.ResponseWriter, r *http.Request, runs []byte, roots []string) {
	if runs == nil || r.URL.Path != "/" {
		h.ServeHTTP(w, r)
		return
	}
	page, err := h.withRuns(runs, roots, time.Now())
	if err != nil {
		h.ServeHTTP(w, r)
		return
	}
	h.write(w, r, "text/html; charset=utf-8", "no-store", page)
}

// withRuns renders the page holding the first rows of runs.
func (h *Handler) withRuns(runs []byte, roots []string, now time.Time) ([]byte, error) {
	v, err := newRunsView(runs, roots, now)
	if err != nil {
		return nil, err
	}
	d := h.data
	d.Runs = v
	var buf bytes.Buffer
	if err := h.page.Execute(&buf, d); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func (h *Handler) write(w http.ResponseWriter, r *http.Request, ctype, cache string, b []byte) {
	hd := w.Header()
	pagesec.Set(hd)
	hd.Set("Content-Type", ctype)
	hd.Set("Cache-Control", cache)
	hd.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(b)
	}
}
