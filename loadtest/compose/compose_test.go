package compose

import (
	"bufio"
	"context"
	"maps"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
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

// hostPortsFile is the opt-in override that publishes PostgreSQL and Redis
// on the host.
const hostPortsFile = "../../docker-compose.host-ports.yml"

// The image built from this repository, and where its Dockerfile puts the
// binary and the health probe.
const (
	dockerfile   = "../../Dockerfile"
	localImage   = "sekali:local"
	healthProbe  = "/usr/local/bin/healthcheck"
	repoServices = "app migrate seed worker" // the services that run localImage
)

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
		// By default PostgreSQL and Redis stay on the compose network: on
		// the host they would clash with a local server on the same port.
		for _, s := range []types.ServiceConfig{postgres, redis} {
			if len(s.Ports) > 0 {
				t.Errorf("%s publishes %+v on the host; leave that to %s", s.Name, s.Ports, hostPortsFile)
			}
		}
	})

	t.Run("host ports, opted in", func(t *testing.T) {
		t.Parallel()
		p := loadCompose(t, composeFile, hostPortsFile)
		for _, c := range []struct {
			service string
			port    string
		}{{"postgres", dbURL.Port()}, {"redis", redisURL.Port()}} {
			s := composeService(t, p, c.service)
			assertPublishes(t, s, c.port)
			for _, port := range s.Ports {
				if port.HostIP != "127.0.0.1" {
					t.Errorf("%s publishes %s on %q, want 127.0.0.1 only (the credentials are public)", c.service, port.Published, port.HostIP)
				}
			}
		}
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
		// Every service that runs the image built from this repository runs
		// the sekali binary.
		names := repoImageServices(p)
		if want := strings.Fields(repoServices); !slices.Equal(names, want) {
			t.Fatalf("services running %s = %v, want %v", localImage, names, want)
		}
		appEnv := composeEnv(t, app)
		for _, name := range names {
			env := composeEnv(t, composeService(t, p, name))
			// seed alone gets the admin's password, from .env or the shell:
			// loaded here without either, it must be empty (no password is
			// committed), and it is the only difference.
			if name == "seed" {
				if pw, ok := env["ADMIN_PASSWORD"]; !ok || pw != "" {
					t.Errorf("seed ADMIN_PASSWORD = %q (set: %v), want it from ${ADMIN_PASSWORD:-}, empty here", pw, ok)
				}
				env = maps.Clone(env)
				delete(env, "ADMIN_PASSWORD")
			}
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
	if err := cfg.CheckWeb(); err != nil || !cfg.OrderTokenKeyIsDefault {
		t.Errorf("%s: the web role's order token secret: %v (development default %v); leave ORDER_TOKEN_SECRET unset, "+
			"so that with SANDBOX_GATEWAY=on the public development secret is used", service, err, cfg.OrderTokenKeyIsDefault)
	}
}

// The image is built once, by one service, and run by name by the others:
// four builds of the same Dockerfile would be four images to keep in step.
func TestComposeBuildsTheImageOnce(t *testing.T) {
	t.Parallel()
	p := loadCompose(t)
	var built []string
	for _, name := range repoImageServices(p) {
		s := composeService(t, p, name)
		if s.Image != localImage {
			t.Errorf("%s image = %q, want %q", name, s.Image, localImage)
		}
		if s.Build != nil {
			built = append(built, name)
			if s.Build.Context != filepath.Dir(mustAbs(t, composeFile)) || (s.Build.Dockerfile != "" && s.Build.Dockerfile != "Dockerfile") {
				t.Errorf("%s builds %s/%s, want the repository's Dockerfile", name, s.Build.Context, s.Build.Dockerfile)
			}
		}
	}
	if len(built) != 1 {
		t.Errorf("services that build %s = %v, want exactly one", localImage, built)
	}
}

// Every image that is pulled names a version: no tag (latest) or :latest
// changes under you on the next pull.
func TestComposeImagesArePinned(t *testing.T) {
	t.Parallel()
	p := loadCompose(t, composeFile, hostPortsFile)
	images := map[string]string{}
	for name, s := range p.Services {
		if s.Image != localImage {
			images["service "+name] = s.Image
		}
	}
	for _, from := range dockerfileFrom(t) {
		images["Dockerfile FROM "+from] = from
	}
	for where, image := range images {
		assertPinned(t, where, image)
	}
}

func assertPinned(t *testing.T, where, image string) {
	t.Helper()
	if _, _, ok := strings.Cut(image, "@sha256:"); ok {
		return
	}
	name := image[strings.LastIndex(image, "/")+1:]
	_, tag, ok := strings.Cut(name, ":")
	if !ok || tag == "" || tag == "latest" {
		t.Errorf("%s: image %q is not pinned to a version", where, image)
	}
}

// The app and the worker report their health, through the probe the
// Dockerfile installs (the image has no shell, curl or wget), on the ports
// and paths the binary serves /healthz on.
func TestComposeHealthchecksAndRestarts(t *testing.T) {
	t.Parallel()
	p := loadCompose(t)
	_, httpPort, _ := net.SplitHostPort(config.DefaultHTTPAddr)
	_, metricsPort, _ := net.SplitHostPort(config.DefaultMetricsAddr)
	for service, port := range map[string]string{"app": httpPort, "worker": metricsPort} {
		s := composeService(t, p, service)
		hc := s.HealthCheck
		if hc == nil || hc.Disable || len(hc.Test) == 0 {
			t.Errorf("%s has no healthcheck", service)
			continue
		}
		want := []string{"CMD", healthProbe, "http://127.0.0.1:" + port + "/healthz"}
		if !slices.Equal([]string(hc.Test), want) {
			t.Errorf("%s healthcheck test = %q, want %q (exec form: the image has no shell)", service, hc.Test, want)
		}
		if hc.Interval == nil || hc.Retries == nil || hc.StartPeriod == nil {
			t.Errorf("%s healthcheck: set interval, retries and start_period: %+v", service, hc)
		}
		// serve exits when PostgreSQL is out of reach at start: Docker must
		// start it again, or a database restart leaves the shop down.
		if s.Restart != "unless-stopped" && s.Restart != "always" {
			t.Errorf("%s restart = %q, want unless-stopped", service, s.Restart)
		}
	}
	// The probe is in the image, built from a package of this repository.
	var copied, built bool
	for _, in := range dockerfileInstructions(t) {
		f := strings.Fields(in)
		switch {
		case f[0] == "COPY" && f[len(f)-1] == healthProbe:
			copied = true
		case f[0] == "RUN" && strings.Contains(in, "go build") && strings.Contains(in, "./tools/healthcheck"):
			built = true
		}
	}
	if !copied || !built {
		t.Errorf("the Dockerfile does not build ./tools/healthcheck (%v) and copy it to %s (%v)", built, healthProbe, copied)
	}
	if _, err := os.Stat("../../tools/healthcheck/main.go"); err != nil {
		t.Error(err)
	}
}

// The Dockerfile builds with go.mod's Go version: its GO_VERSION default
// is go.mod's go line, and the build stage uses it.
func TestComposeImageGoVersionIsGoMods(t *testing.T) {
	t.Parallel()
	mod, err := os.ReadFile("../../go.mod")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go\s+(\S+)\s*$`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("go.mod has no go line")
	}
	goVersion := string(m[1])
	var arg string
	var usesArg bool
	for _, in := range dockerfileInstructions(t) {
		f := strings.Fields(in)
		if f[0] == "ARG" {
			if v, ok := strings.CutPrefix(f[1], "GO_VERSION="); ok {
				arg = v
			}
		}
		if f[0] == "FROM" && strings.HasPrefix(f[1], "golang:") {
			if f[1] != "golang:${GO_VERSION}" {
				t.Errorf("Dockerfile: FROM %s, want golang:${GO_VERSION}", f[1])
			}
			usesArg = true
		}
	}
	if arg != goVersion {
		t.Errorf("Dockerfile ARG GO_VERSION=%s, want go.mod's %s", arg, goVersion)
	}
	if !usesArg {
		t.Error("the Dockerfile has no FROM golang:${GO_VERSION} stage")
	}
}

// .env.example documents the variables compose reads from .env, and .env
// itself is never committed nor sent to the image build.
func TestComposeDotEnv(t *testing.T) {
	t.Parallel()
	compose, err := os.ReadFile(composeFile)
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../../.env.example")
	if err != nil {
		t.Fatal(err)
	}
	variable := regexp.MustCompile(`^[A-Z][A-Z0-9_]*$`)
	var names []string
	for _, line := range strings.Split(string(example), "\n") {
		// Set (NAME=…) or suggested in a comment (# NAME=…).
		line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		if name, _, ok := strings.Cut(line, "="); ok && variable.MatchString(name) {
			names = append(names, name)
			if name != "COMPOSE_FILE" && !strings.Contains(string(compose), "${"+name) {
				t.Errorf(".env.example sets %s, which docker-compose.yml does not read", name)
			}
		}
	}
	if !slices.Contains(names, "ADMIN_PASSWORD") {
		t.Errorf(".env.example does not mention ADMIN_PASSWORD: %v", names)
	}
	for _, file := range []string{"../../.gitignore", "../../.dockerignore"} {
		b, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		if lines := strings.Fields(string(b)); !slices.Contains(lines, ".env") && !slices.Contains(lines, "/.env") {
			t.Errorf("%s does not exclude .env", file)
		}
	}
}

// repoImageServices lists, sorted, the services that run the image built
// from this repository.
func repoImageServices(p *types.Project) []string {
	var names []string
	for name, s := range p.Services {
		if s.Build != nil || s.Image == localImage {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// dockerfileInstructions returns the Dockerfile's instructions, one string
// each, continuation lines joined and comments dropped.
func dockerfileInstructions(t *testing.T) []string {
	t.Helper()
	f, err := os.Open(dockerfile)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	var cur strings.Builder
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if l, ok := strings.CutSuffix(line, "\\"); ok {
			cur.WriteString(l + " ")
			continue
		}
		cur.WriteString(line)
		out = append(out, cur.String())
		cur.Reset()
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// dockerfileFrom returns the images of the FROM lines, build arguments
// replaced by their defaults.
func dockerfileFrom(t *testing.T) []string {
	t.Helper()
	args := map[string]string{}
	var images []string
	for _, in := range dockerfileInstructions(t) {
		f := strings.Fields(in)
		switch f[0] {
		case "ARG":
			if name, v, ok := strings.Cut(f[1], "="); ok {
				args[name] = v
			}
		case "FROM":
			images = append(images, os.Expand(f[1], func(name string) string { return args[name] }))
		}
	}
	if len(images) == 0 {
		t.Fatal("the Dockerfile has no FROM")
	}
	return images
}

func mustAbs(t *testing.T, path string) string {
	t.Helper()
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	return abs
}

func loadCompose(t *testing.T, files ...string) *types.Project {
	t.Helper()
	if len(files) == 0 {
		files = []string{composeFile}
	}
	// No OS environment and no .env file: the test sees the files as written,
	// whatever the developer has exported.
	opts, err := cli.NewProjectOptions(files)
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(t.Context())
	if err != nil {
		t.Fatalf("load %v: %v", files, err)
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

// The compose observability profile runs Prometheus, Alertmanager,
// Grafana and Jaeger at exact versions, and every file it mounts from the
// repository exists.
func TestComposeObservabilityProfile(t *testing.T) {
	t.Parallel()
	opts, err := cli.NewProjectOptions([]string{composeFile}, cli.WithProfiles([]string{"observability"}))
	if err != nil {
		t.Fatal(err)
	}
	p, err := opts.LoadProject(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	exact := regexp.MustCompile(`:v?\d+\.\d+\.\d+$`)
	for _, name := range []string{"prometheus", "alertmanager", "grafana", "jaeger"} {
		s, err := p.GetService(name)
		if err != nil {
			t.Errorf("%s: %v", composeFile, err)
			continue
		}
		if !slices.Equal(s.Profiles, []string{"observability"}) {
			t.Errorf("%s: profiles %v, want [observability]", name, s.Profiles)
		}
		if !exact.MatchString(s.Image) {
			t.Errorf("%s: image %q, want a tag of an exact version", name, s.Image)
		}
		for _, v := range s.Volumes {
			if v.Type != "bind" {
				continue
			}
			if _, err := os.Stat(v.Source); err != nil {
				t.Errorf("%s mounts %s: %v", name, v.Source, err)
			}
		}
	}
}
