package dash

import (
	"bytes"
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/echocache/echocache/bus"
	"github.com/echocache/echocache/cache"
)

// The templates and assets, embedded: one template file per page over one layout.

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFS embed.FS

// pageNames are the pages, each templates/<name>.html defining "title" and "content".
var pageNames = []string{"overview", "queue", "job", "table", "confirm", "error"}

type pages struct {
	t map[string]*template.Template
}

func loadPages() (*pages, error) {
	p := &pages{t: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFiles, "templates/layout.html", "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("dash: template %s: %w", name, err)
		}
		p.t[name] = t
	}
	return p, nil
}

func staticFiles() http.Handler {
	sub, _ := fs.Sub(staticFS, "static")
	return http.FileServerFS(sub)
}

// view is what every page's template gets: the layout's fields and the page's own Data.
type view struct {
	Title    string // the page's title
	Site     string // Config.Title
	Prefix   string
	CSRF     string
	ReadOnly bool
	Flash    string
	Back     string // this page's path and query, where an action returns
	Data     any
}

// render writes the page name with data; the CSRF token is made for the browser.
func (d *Dashboard) render(w http.ResponseWriter, r *http.Request, status int, name, title string, data any) {
	v := view{
		Title: title, Site: d.cfg.Title, Prefix: d.cfg.Prefix, ReadOnly: d.cfg.ReadOnly,
		Flash: r.URL.Query().Get("done"), Back: d.back(r), Data: data,
	}
	if !d.cfg.ReadOnly {
		v.CSRF = d.csrf.token(w, r)
	}
	var buf bytes.Buffer
	if err := d.pages.t[name].Execute(&buf, v); err != nil {
		slog.Error("dash: rendering a page", "page", name, "err", err)
		http.Error(w, "dash: rendering the page failed", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	w.Write(buf.Bytes())
}

// back is r's own path below the dashboard, with its query less the flash message.
func (d *Dashboard) back(r *http.Request) string {
	q := r.URL.Query()
	q.Del("done")
	p := d.url(r.URL.Path)
	if len(q) > 0 {
		p += "?" + q.Encode()
	}
	return p
}

// fail renders the error page with status and msg.
func (d *Dashboard) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	d.render(w, r, status, "error", http.StatusText(status), struct {
		Status int
		Msg    string
	}{status, msg})
}

var funcs = template.FuncMap{
	"when": func(t time.Time) string {
		if t.IsZero() {
			return "—"
		}
		return t.UTC().Format("2006-01-02 15:04:05.000 UTC")
	},
	"iso": func(t time.Time) string {
		if t.IsZero() {
			return ""
		}
		return t.UTC().Format(time.RFC3339Nano)
	},
	"ago":        ago,
	"pct":        func(f float64) string { return strconv.FormatFloat(100*f, 'f', 1, 64) + "%" },
	"rate":       func(f float64) string { return strconv.FormatFloat(f, 'f', 1, 64) + "/s" },
	"dur":        dur,
	"num":        num,
	"int64":      func(n int) int64 { return int64(n) },
	"plural":     plural,
	"path":       url.PathEscape,
	"query":      url.QueryEscape,
	"x100":       func(f float64) string { return strconv.FormatFloat(100*f, 'f', 2, 64) },
	"addf":       func(a, b float64) float64 { return a + b },
	"lanerate":   laneRate,
	"lanelimits": bus.LaneLimits.String,
	"meanLoad": func(s cache.Stats) time.Duration {
		if s.Loads == 0 {
			return 0
		}
		return s.LoadTime / time.Duration(s.Loads)
	},
}

// ago is t relative to now ("3s ago", "in 2m").
func ago(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	d := time.Until(t)
	if d < 0 {
		return dur(-d) + " ago"
	}
	return "in " + dur(d)
}

// dur is d in a short human form, to one decimal where it has one: "250ms", "1.5s", "15s".
func dur(d time.Duration) string {
	one := func(f float64, unit string) string {
		return strings.TrimSuffix(strconv.FormatFloat(f, 'f', 1, 64), ".0") + unit
	}
	switch {
	case d < time.Millisecond:
		return strconv.FormatFloat(float64(d)/1e3, 'f', 0, 64) + "µs"
	case d < time.Second:
		return one(float64(d)/1e6, "ms")
	case d < time.Minute:
		return one(d.Seconds(), "s")
	case d < time.Hour:
		return one(d.Minutes(), "m")
	default:
		return one(d.Hours(), "h")
	}
}

// plural is n and noun, with an s when n is not 1: "1 job", "6 jobs".
func plural(n int64, noun string) string {
	if n == 1 {
		return num(n) + " " + noun
	}
	return num(n) + " " + noun + "s"
}

// num is n with thin separators between thousands.
func num(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteRune(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}
