package dash

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"net/http"
)

// CSRF protection of every POST, two checks that must both pass:
//
//   - the browser's own signal: net/http's CrossOriginProtection refuses a request whose
//     Sec-Fetch-Site says cross-site, or whose Origin names another host;
//   - a token in the form: HMAC-SHA256(secret, cookie), where the cookie is a random value
//     the dashboard sets on the first page a browser loads (HttpOnly, SameSite=Strict). A
//     forged form on another site knows neither the cookie nor the secret, so it cannot
//     write the token; a stolen token is worth nothing without its browser's cookie.

// csrfCookie names the per-browser cookie; csrfField, the form field holding the token.
const (
	csrfCookie = "echodash_csrf"
	csrfField  = "csrf"
)

type csrf struct {
	secret []byte
	path   string // the cookie's Path: the dashboard's prefix
	origin *http.CrossOriginProtection
}

func newCSRF(secret []byte, prefix string) *csrf {
	path := prefix
	if path == "" {
		path = "/"
	}
	return &csrf{secret: secret, path: path, origin: http.NewCrossOriginProtection()}
}

// token is the form token for the request's browser, setting the cookie when it has none.
func (c *csrf) token(w http.ResponseWriter, r *http.Request) string {
	v := ""
	if ck, err := r.Cookie(csrfCookie); err == nil && len(ck.Value) >= 22 {
		v = ck.Value
	} else {
		b := make([]byte, 24)
		rand.Read(b)
		v = base64.RawURLEncoding.EncodeToString(b)
		http.SetCookie(w, &http.Cookie{
			Name: csrfCookie, Value: v, Path: c.path, HttpOnly: true, Secure: r.TLS != nil,
			SameSite: http.SameSiteStrictMode,
		})
	}
	return c.sign(v)
}

func (c *csrf) sign(v string) string {
	m := hmac.New(sha256.New, c.secret)
	m.Write([]byte(v))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// check reports why the POST r is refused, or "" when it passes both checks. It reads the
// form (r.ParseForm).
func (c *csrf) check(r *http.Request) string {
	if err := c.origin.Check(r); err != nil {
		return "cross-origin request refused"
	}
	ck, err := r.Cookie(csrfCookie)
	if err != nil || ck.Value == "" {
		return "no CSRF cookie: load the page again"
	}
	if err := r.ParseForm(); err != nil {
		return "the form does not parse"
	}
	got := r.PostForm.Get(csrfField)
	if got == "" {
		return "no CSRF token in the form"
	}
	if !hmac.Equal([]byte(got), []byte(c.sign(ck.Value))) {
		return "the CSRF token does not match: load the page again"
	}
	return ""
}
