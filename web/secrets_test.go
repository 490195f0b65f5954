package web_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/pquerna/otp/totp"

	"github.com/sekali/sekali/app/admins"
	"github.com/sekali/sekali/models"
)

// A second factor the tests give an admin directly.
const testTOTPSecret = "JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP"

// totpCode is the code of testTOTPSecret at at.
func totpCode(t *testing.T, at time.Time) string {
	t.Helper()
	code, err := totp.GenerateCode(testTOTPSecret, at)
	if err != nil {
		t.Fatal(err)
	}
	return code
}

// withSecondFactor gives the test admin testTOTPSecret as second factor.
func (c *console) withSecondFactor() {
	c.t.Helper()
	if err := c.db.Model(&models.AdminUser{}).Where("email = ?", adminEmail).Update("totp_secret", testTOTPSecret).Error; err != nil {
		c.t.Fatal(err)
	}
}

// loginWithCode logs the client in with the password and this step's
// code, and returns the code.
func (c *console) loginWithCode() string {
	c.t.Helper()
	if p := c.post("/admin/login", url.Values{"email": {adminEmail}, "password": {adminPassword}}); p.StatusCode != http.StatusSeeOther {
		c.t.Fatalf("password step: %d\n%s", p.StatusCode, p.Body)
	}
	code := totpCode(c.t, time.Now())
	if p := c.post("/admin/login/code", url.Values{"code": {code}}); p.StatusCode != http.StatusSeeOther {
		c.t.Fatalf("code step: %d\n%s", p.StatusCode, p.Body)
	}
	return code
}

// notices are the subjects of the notices written to the admin email,
// oldest first; each must have its send task.
func (c *console) notices(email string) (subjects []string) {
	c.t.Helper()
	var rows []models.OutboundEmail
	if err := c.db.Order("id").Find(&rows, "key LIKE 'admin_notice:%' AND \"to\" = ?", email).Error; err != nil {
		c.t.Fatal(err)
	}
	for _, e := range rows {
		var tasks int64
		c.db.Model(&models.OutboxMessage{}).Where("task_id = ?", "email:send:"+e.Key).Count(&tasks)
		if tasks != 1 {
			c.t.Errorf("the notice %s has %d send tasks, want 1", e.Key, tasks)
		}
		subjects = append(subjects, e.Subject)
	}
	return subjects
}

// Removing a second factor needs a fresh code — not the one the session
// logged in with — and each change to an admin's second factor (set up,
// removed, reset by an owner) emails that admin, with its send task.
func TestSecondFactorChangesAskAFreshCodeAndTellTheAdmin(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	c.withSecondFactor()
	used := c.loginWithCode()
	if p := c.post("/admin/account/mfa/remove", url.Values{"code": {used}}); p.StatusCode != http.StatusUnprocessableEntity {
		t.Errorf("removal with the code the log-in used: %d, want 422", p.StatusCode)
	}
	if got := c.notices(adminEmail); len(got) != 0 {
		t.Errorf("a refused removal sent %q", got)
	}
	fresh := totpCode(t, time.Now().Add(30*time.Second))
	if p := c.post("/admin/account/mfa/remove", url.Values{"code": {fresh}}); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("removal with a fresh code: %d\n%s", p.StatusCode, p.Body)
	}
	if got := c.notices(adminEmail); len(got) != 1 || !strings.Contains(got[0], "removed") {
		t.Errorf("after the removal the admin was sent %q, want one notice of it", got)
	}
	// Set up again: another notice.
	secret := c.get("/admin/account").Doc(t).Find("code.mono").First().Text()
	code, err := totp.GenerateCode(secret, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if p := c.post("/admin/account/mfa", url.Values{"code": {code}}); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("set up: %d\n%s", p.StatusCode, p.Body)
	}
	if got := c.notices(adminEmail); len(got) != 2 || !strings.Contains(got[1], "set up") {
		t.Errorf("after the set-up the admin was sent %q, want a second notice", got)
	}
	// An owner resets an operator's: the operator is told.
	c.loginAs("op@example.com", models.RoleOperator)
	var op models.AdminUser
	c.db.Model(&op).Where("email = ?", "op@example.com").Update("totp_secret", testTOTPSecret)
	c.db.Take(&op, "email = ?", "op@example.com")
	if p := c.post("/admin/admins/"+strconv.FormatInt(op.ID, 10)+"/reset-mfa", nil); p.StatusCode != http.StatusSeeOther {
		t.Fatalf("reset: %d\n%s", p.StatusCode, p.Body)
	}
	if got := c.notices("op@example.com"); len(got) != 1 || !strings.Contains(got[0], "reset") {
		t.Errorf("after the reset the operator was sent %q, want one notice", got)
	}
}

// secretRoute is a route that takes a secret from whoever sends it: how
// to reach the point where it is asked for, a wrong guess, and the right
// secret (which the throttle must refuse too once it is over its limit).
type secretRoute struct {
	setup func(c *console)
	wrong func(c *console) page
	right func(c *console) page
	// exempt says why a route that takes a field named like a secret is
	// not throttled; empty for a throttled one.
	exempt string
	// unchanged checks that the refused right secret changed nothing.
	unchanged func(t *testing.T, c *console)
}

// secretRoutes are every route that takes a secret, by "METHOD path".
// TestEverySecretTakingRouteIsListed keeps it complete.
var secretRoutes = map[string]secretRoute{
	"POST /admin/login": {
		setup: func(c *console) {},
		wrong: func(c *console) page {
			return c.post("/admin/login", url.Values{"email": {adminEmail}, "password": {"a wrong guess"}})
		},
		right: func(c *console) page {
			return c.post("/admin/login", url.Values{"email": {adminEmail}, "password": {adminPassword}})
		},
	},
	"POST /admin/login/code": {
		setup: func(c *console) {
			c.withSecondFactor()
			if p := c.post("/admin/login", url.Values{"email": {adminEmail}, "password": {adminPassword}}); p.StatusCode != http.StatusSeeOther {
				c.t.Fatalf("password step: %d", p.StatusCode)
			}
		},
		wrong: func(c *console) page { return c.post("/admin/login/code", url.Values{"code": {"000000"}}) },
		right: func(c *console) page {
			return c.post("/admin/login/code", url.Values{"code": {totpCode(c.t, time.Now())}})
		},
	},
	"POST /admin/account/password": {
		setup: func(c *console) { c.login() },
		wrong: func(c *console) page {
			return c.post("/admin/account/password", url.Values{"current": {"a wrong guess"},
				"password": {"a long new password"}, "confirm": {"a long new password"}})
		},
		right: func(c *console) page {
			return c.post("/admin/account/password", url.Values{"current": {adminPassword},
				"password": {"a long new password"}, "confirm": {"a long new password"}})
		},
		unchanged: func(t *testing.T, c *console) {
			if _, err := admins.NewService(c.db, time.Now).Authenticate(t.Context(), adminEmail, adminPassword); err != nil {
				t.Errorf("the password changed behind the throttle: %v", err)
			}
		},
	},
	"POST /admin/account/mfa": {
		setup: func(c *console) {
			c.login()
			c.get("/admin/account") // the key to set up, kept in the session
		},
		wrong: func(c *console) page { return c.post("/admin/account/mfa", url.Values{"code": {"000000"}}) },
		right: func(c *console) page {
			p := c.get("/admin/account")
			secret := p.Doc(c.t).Find("code.mono").First().Text()
			code, err := totp.GenerateCode(secret, time.Now())
			if err != nil {
				c.t.Fatal(err)
			}
			return c.post("/admin/account/mfa", url.Values{"code": {code}})
		},
		unchanged: func(t *testing.T, c *console) {
			var u models.AdminUser
			c.db.Take(&u, "email = ?", adminEmail)
			if u.TOTPSecret != nil {
				t.Error("a second factor was set up behind the throttle")
			}
		},
	},
	"POST /admin/account/mfa/remove": {
		setup: func(c *console) {
			c.withSecondFactor()
			c.loginWithCode()
		},
		wrong: func(c *console) page { return c.post("/admin/account/mfa/remove", url.Values{"code": {"000000"}}) },
		right: func(c *console) page {
			return c.post("/admin/account/mfa/remove", url.Values{"code": {totpCode(c.t, time.Now().Add(30*time.Second))}})
		},
		unchanged: func(t *testing.T, c *console) {
			var u models.AdminUser
			c.db.Take(&u, "email = ?", adminEmail)
			if u.TOTPSecret == nil {
				t.Error("the second factor was removed behind the throttle")
			}
		},
	},
	"POST /admin/invite/:token": {
		exempt: "the token is 256 random bits, only its hash kept: not guessable; the password is chosen, not tried",
	},
}

// Every secret a session can try counts against the log-in throttle: after
// admins.MaxFailures wrong guesses, even the right secret is answered
// 429 with Retry-After and changes nothing, and the log-in page refuses
// the admin's password too — one count for the admin and the client.
func TestEverySecretIsThrottled(t *testing.T) {
	t.Parallel()
	for route, sr := range secretRoutes {
		if sr.exempt != "" {
			continue
		}
		t.Run(strings.ReplaceAll(route, "/", "_"), func(t *testing.T) {
			t.Parallel()
			c := newConsole(t)
			sr.setup(c)
			for i := range admins.MaxFailures {
				p := sr.wrong(c)
				if p.StatusCode == http.StatusTooManyRequests || p.StatusCode < 400 {
					t.Fatalf("wrong guess %d: status %d, want a refusal that is not yet 429", i+1, p.StatusCode)
				}
			}
			p := sr.right(c)
			if p.StatusCode != http.StatusTooManyRequests {
				t.Fatalf("the right secret after %d wrong guesses: status %d, want 429\n%s", admins.MaxFailures, p.StatusCode, p.Body)
			}
			if retry, err := strconv.Atoi(p.Header.Get("Retry-After")); err != nil || retry < 1 || retry > int(admins.FailureWindow.Seconds()) {
				t.Errorf("Retry-After = %q, want seconds within the window", p.Header.Get("Retry-After"))
			}
			if !strings.Contains(p.Body, "Too many") && !strings.Contains(p.Body, "too many") {
				t.Errorf("the 429 does not say why:\n%s", p.Body)
			}
			if sr.unchanged != nil {
				sr.unchanged(t, c)
			}
			login := c.postWith(c.newClient(), "/admin/login", url.Values{"email": {adminEmail}, "password": {adminPassword}})
			if login.StatusCode != http.StatusTooManyRequests {
				t.Errorf("the log-in page after the guesses: status %d, want 429 (one throttle)", login.StatusCode)
			}
		})
	}
}

// secretField is a form field or path parameter whose name says it
// carries a secret.
var secretField = regexp.MustCompile(`(?i)pass|code|token|secret|otp|current|pin$`)

// Every route that changes something and reads a field or parameter named
// like a secret (found by listing the server's routes and reading their
// handlers' source, with every function of the package they call) is in
// secretRoutes, so that a route added later cannot take a secret past the
// throttle; and every entry of secretRoutes is a route.
func TestEverySecretTakingRouteIsListed(t *testing.T) {
	t.Parallel()
	c := newConsole(t)
	fields := handlerFields(t, ".", "sandboxgw")
	routes := map[string]bool{}
	for _, r := range c.srv.Routes() {
		key := r.Method + " " + r.Path
		routes[key] = true
		if r.Method == http.MethodGet || r.Method == http.MethodHead || r.Method == http.MethodOptions ||
			r.Method == http.MethodConnect || r.Method == http.MethodTrace {
			continue
		}
		pkg, fn := handlerOf(r.Name)
		read, ok := fields[pkg+"."+fn]
		if !ok {
			t.Errorf("%s: cannot find its handler %s (%s) to read its fields", key, fn, r.Name)
			continue
		}
		var secret []string
		for f := range read {
			if secretField.MatchString(f) {
				secret = append(secret, f)
			}
		}
		for _, seg := range strings.Split(r.Path, "/") {
			if strings.HasPrefix(seg, ":") && secretField.MatchString(seg[1:]) {
				secret = append(secret, seg)
			}
		}
		if _, listed := secretRoutes[key]; len(secret) > 0 && !listed {
			t.Errorf("%s takes %v but is not in secretRoutes: throttle it (trySecret) and list it, or list why not", key, secret)
		}
	}
	for key := range secretRoutes {
		if !routes[key] {
			t.Errorf("secretRoutes lists %s, which is no route", key)
		}
	}
}

// handlerOf is the package and function of a route's handler name, as
// Echo records it ("…/web.(*Server).removeMFA-fm", "…/web.(*Server).adminManage.func1").
func handlerOf(name string) (pkg, fn string) {
	name = name[strings.LastIndex(name, "/")+1:]
	pkg, rest, _ := strings.Cut(name, ".")
	if strings.HasPrefix(rest, "(") {
		_, rest, _ = strings.Cut(rest, ").")
	}
	fn, _, _ = strings.Cut(rest, ".")
	fn, _, _ = strings.Cut(fn, "-")
	return pkg, fn
}

// handlerFields reads the Go files of each directory (a package) and
// returns, for each function "pkg.name", the names of the fields,
// parameters and keys it reads (the string arguments of FormValue,
// Param, QueryParam and a form's Get, and string indexes), with those of every
// function of its package that it calls.
func handlerFields(t *testing.T, dirs ...string) map[string]map[string]bool {
	t.Helper()
	own := map[string]map[string]bool{}
	calls := map[string][]string{}
	for _, dir := range dirs {
		files, err := filepath.Glob(filepath.Join(dir, "*.go"))
		if err != nil {
			t.Fatal(err)
		}
		fset := token.NewFileSet()
		consts := map[string]string{}
		var decls []*ast.FuncDecl
		var pkg string
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			file, err := parser.ParseFile(fset, f, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			pkg = file.Name.Name
			for _, d := range file.Decls {
				switch d := d.(type) {
				case *ast.FuncDecl:
					decls = append(decls, d)
				case *ast.GenDecl:
					for _, spec := range d.Specs {
						if vs, ok := spec.(*ast.ValueSpec); ok && d.Tok == token.CONST {
							for i, n := range vs.Names {
								if i < len(vs.Values) {
									if s, ok := stringOf(vs.Values[i], nil); ok {
										consts[n.Name] = s
									}
								}
							}
						}
					}
				}
			}
		}
		for _, d := range decls {
			name := pkg + "." + d.Name.Name
			read := map[string]bool{}
			ast.Inspect(d, func(n ast.Node) bool {
				switch n := n.(type) {
				case *ast.CallExpr:
					switch fun := n.Fun.(type) {
					case *ast.SelectorExpr:
						// c.Get reads the request's context values, not what it sent.
						recv, _ := fun.X.(*ast.Ident)
						switch fun.Sel.Name {
						case "FormValue", "Param", "QueryParam", "Get":
							if len(n.Args) == 1 && (fun.Sel.Name != "Get" || recv == nil || recv.Name != "c") {
								if s, ok := stringOf(n.Args[0], consts); ok {
									read[s] = true
								}
							}
						}
						calls[name] = append(calls[name], pkg+"."+fun.Sel.Name)
					case *ast.Ident:
						calls[name] = append(calls[name], pkg+"."+fun.Name)
					}
				case *ast.IndexExpr:
					if s, ok := stringOf(n.Index, consts); ok {
						read[s] = true
					}
				}
				return true
			})
			if own[name] == nil {
				own[name] = map[string]bool{}
			}
			for f := range read {
				own[name][f] = true
			}
		}
	}
	all := map[string]map[string]bool{}
	for name := range own {
		seen := map[string]bool{name: true}
		queue := []string{name}
		all[name] = map[string]bool{}
		for len(queue) > 0 {
			n := queue[0]
			queue = queue[1:]
			for f := range own[n] {
				all[name][f] = true
			}
			for _, callee := range calls[n] {
				if _, known := own[callee]; known && !seen[callee] {
					seen[callee] = true
					queue = append(queue, callee)
				}
			}
		}
	}
	return all
}

// stringOf is the value of a string literal, or of a constant of consts.
func stringOf(e ast.Expr, consts map[string]string) (string, bool) {
	switch e := e.(type) {
	case *ast.BasicLit:
		if e.Kind == token.STRING {
			s, err := strconv.Unquote(e.Value)
			return s, err == nil
		}
	case *ast.Ident:
		s, ok := consts[e.Name]
		return s, ok
	}
	return "", false
}
