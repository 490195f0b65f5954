package main

import (
	"maps"
	"net"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/compose-spec/compose-go/v2/cli"
	"github.com/compose-spec/compose-go/v2/types"

	"github.com/sekali/sekali/app/config"
)

// composeFile is the stack that `docker compose up` starts. Its ports and
// credentials must agree with config's defaults, or a stock local run and
// the compose stack quietly stop talking to the same services.
const composeFile = "../../docker-compose.yml"

func TestComposeAgreesWithConfigDefaults(t *testing.T) {
	t.Parallel()
	p := loadCompose(t)
	app := composeService(t, p, "app")
	postgres := composeService(t, p, "postgres")
	redis := composeService(t, p, "redis")

	dbURL := mustParseURL(t, config.DefaultDatabaseURL)
	redisURL := mustParseURL(t, config.DefaultRedisURL)
	_, httpPort, err := net.SplitHostPort(config.DefaultHTTPAddr)
	if err != nil {
		t.Fatalf("DefaultHTTPAddr %q: %v", config.DefaultHTTPAddr, err)
	}

	t.Run("published ports", func(t *testing.T) {
		t.Parallel()
		assertPublishes(t, app, httpPort)
		assertPublishes(t, postgres, dbURL.Port())
		assertPublishes(t, redis, redisURL.Port())
	})

	t.Run("postgres credentials", func(t *testing.T) {
		t.Parallel()
		env := composeEnv(t, postgres)
		password, _ := dbURL.User.Password()
		want := map[string]string{
			"POSTGRES_USER":     dbURL.User.Username(),
			"POSTGRES_PASSWORD": password,
			"POSTGRES_DB":       strings.TrimPrefix(dbURL.Path, "/"),
		}
		for name, w := range want {
			if got := env[name]; got != w {
				t.Errorf("postgres %s = %q, want %q (from DefaultDatabaseURL)", name, got, w)
			}
		}
	})

	t.Run("sekali environment", func(t *testing.T) {
		t.Parallel()
		// Every service built from this repository runs the sekali binary.
		var names []string
		for name, s := range p.Services {
			if s.Build != nil {
				names = append(names, name)
			}
		}
		slices.Sort(names)
		if want := []string{"app", "migrate", "seed", "worker"}; !slices.Equal(names, want) {
			t.Fatalf("services built from the repository = %v, want %v", names, want)
		}
		appEnv := composeEnv(t, app)
		for _, name := range names {
			env := composeEnv(t, composeService(t, p, name))
			// migrate and seed must reach the same database the app serves from.
			if !maps.Equal(env, appEnv) {
				t.Errorf("%s environment = %v, want the app's %v", name, env, appEnv)
			}
			checkSekaliEnv(t, name, env, map[string]string{
				"DATABASE_URL": withHost(dbURL, "postgres"),
				"REDIS_URL":    withHost(redisURL, "redis"),
				"HTTP_ADDR":    config.DefaultHTTPAddr,
			})
		}
	})

	t.Run("app waits for its dependencies", func(t *testing.T) {
		t.Parallel()
		want := map[string]string{
			"postgres": types.ServiceConditionHealthy,
			"redis":    types.ServiceConditionHealthy,
			"seed":     types.ServiceConditionCompletedSuccessfully,
		}
		for dep, cond := range want {
			if got := app.DependsOn[dep].Condition; got != cond {
				t.Errorf("app depends_on %s condition = %q, want %q", dep, got, cond)
			}
		}
		// Without a healthcheck, service_healthy can never be met.
		for _, s := range []types.ServiceConfig{postgres, redis} {
			if hc := s.HealthCheck; hc == nil || hc.Disable || len(hc.Test) == 0 {
				t.Errorf("%s has no healthcheck", s.Name)
			}
		}
	})
}

// checkSekaliEnv runs config.Load on a service's environment: every
// variable must be one Load reads, and Load must accept the values.
func checkSekaliEnv(t *testing.T, service string, env, want map[string]string) {
	t.Helper()
	read := map[string]bool{}
	cfg, err := config.Load(func(name string) string {
		read[name] = true
		return env[name]
	})
	if err != nil {
		t.Errorf("%s: config.Load rejects the compose environment: %v", service, err)
	}
	for name := range env {
		if !read[name] {
			t.Errorf("%s sets %s, which config.Load does not read", service, name)
		}
	}
	for name, w := range want {
		if got := env[name]; got != w {
			t.Errorf("%s %s = %q, want %q", service, name, got, w)
		}
	}
	if cfg.DBMaxConns != config.DefaultDBMaxConns {
		t.Errorf("%s DB_MAX_CONNS = %d, want the default %d", service, cfg.DBMaxConns, config.DefaultDBMaxConns)
	}
	if cfg.OrderTTL != config.DefaultOrderTTL {
		t.Errorf("%s ORDER_TTL = %s, want the default %s", service, cfg.OrderTTL, config.DefaultOrderTTL)
	}
	// A real secret has no place in a committed file.
	if !cfg.SandboxSecretIsDefault {
		t.Errorf("%s sets SANDBOX_WEBHOOK_SECRET; leave it unset so the public development secret is used", service)
	}
}

func loadCompose(t *testing.T) *types.Project {
	t.Helper()
	// No OS environment and no .env file: the test sees the file as written,
	// whatever the developer has exported.
	opts, err := cli.NewProjectOptions([]string{composeFile})
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(t.Context())
	if err != nil {
		t.Fatalf("load %s: %v", composeFile, err)
	}
	return p
}

func composeService(t *testing.T, p *types.Project, name string) types.ServiceConfig {
	t.Helper()
	s, err := p.GetService(name)
	if err != nil {
		t.Fatalf("%s: %v", composeFile, err)
	}
	return s
}

// composeEnv flattens a service's environment. A variable without a value
// would be taken from the host at `up` time, so it is an error here.
func composeEnv(t *testing.T, s types.ServiceConfig) map[string]string {
	t.Helper()
	env := make(map[string]string, len(s.Environment))
	for name, v := range s.Environment {
		if v == nil {
			t.Errorf("%s: %s has no value and would come from the host environment", s.Name, name)
			continue
		}
		env[name] = *v
	}
	return env
}

// assertPublishes checks that port is published on the host as the same
// port, so the defaults reach the container from outside compose.
func assertPublishes(t *testing.T, s types.ServiceConfig, port string) {
	t.Helper()
	n, err := strconv.ParseUint(port, 10, 32)
	if err != nil {
		t.Fatalf("port %q: %v", port, err)
	}
	for _, p := range s.Ports {
		if p.Target == uint32(n) && p.Published == port {
			return
		}
	}
	t.Errorf("%s does not publish %s:%s; ports = %+v", s.Name, port, port, s.Ports)
}

func mustParseURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatalf("parse %q: %v", s, err)
	}
	return u
}

// withHost is u as seen from inside compose: the service name replaces the
// host, and everything else stays.
func withHost(u *url.URL, host string) string {
	c := *u
	c.Host = net.JoinHostPort(host, u.Port())
	return c.String()
}
