package main_test

import (
	"bufio"
	"net"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/pinmarket/pin/platform/config"
)

// dockerfile is what the test reads from the Dockerfile: the instructions
// of its last (runtime) stage and every FROM.
type dockerfile struct {
	froms      []string
	env        map[string]string
	expose     []string
	user       string
	entrypoint []string
	healthArgs []string
	build      string // the RUN line that builds pin
	// buildToolchain is GOTOOLCHAIN as the build stage sets it.
	buildToolchain string
}

func readDockerfile(t *testing.T) dockerfile {
	t.Helper()
	raw, err := os.ReadFile("../../Dockerfile")
	require.NoError(t, err)
	d := dockerfile{}
	var line string
	sc := bufio.NewScanner(strings.NewReader(string(raw)))
	for sc.Scan() {
		text := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(text, "#") || text == "" {
			continue
		}
		if cont, ok := strings.CutSuffix(text, "\\"); ok {
			line += cont + " "
			continue
		}
		line += text
		instr, rest, _ := strings.Cut(line, " ")
		line = ""
		switch strings.ToUpper(instr) {
		case "FROM":
			if v, ok := d.env["GOTOOLCHAIN"]; ok {
				d.buildToolchain = v
			}
			d.froms = append(d.froms, strings.Fields(rest)[0])
			d.env, d.expose, d.user, d.entrypoint, d.healthArgs = map[string]string{}, nil, "", nil, nil
		case "ENV":
			k, v, _ := strings.Cut(rest, "=")
			d.env[k] = v
		case "EXPOSE":
			d.expose = append(d.expose, strings.Fields(rest)...)
		case "USER":
			d.user = rest
		case "ENTRYPOINT":
			d.entrypoint = jsonArray(t, rest)
		case "HEALTHCHECK":
			_, cmd, ok := strings.Cut(rest, "CMD ")
			require.True(t, ok, "HEALTHCHECK without CMD: %s", rest)
			d.healthArgs = jsonArray(t, cmd)
		case "RUN":
			if strings.Contains(rest, "go build") {
				d.build = rest
			}
		}
	}
	require.NoError(t, sc.Err())
	return d
}

func jsonArray(t *testing.T, s string) []string {
	t.Helper()
	var out []string
	require.NoError(t, yaml.Unmarshal([]byte(s), &out), "exec form expected: %s", s)
	return out
}

// composeFile is the part of docker-compose.yml the test reads.
type composeFile struct {
	Services map[string]struct {
		Build       any               `yaml:"build"`
		Image       string            `yaml:"image"`
		Command     []string          `yaml:"command"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		Healthcheck struct {
			Test []string `yaml:"test"`
		} `yaml:"healthcheck"`
	} `yaml:"services"`
}

// interpolate resolves compose's ${VAR:-default} to its default, as an
// environment without VAR would.
var interpolation = regexp.MustCompile(`\$\{[A-Z_]+:-([^}]*)\}`)

// TestContainerFilesAgreeWithTheConfiguration reads the Dockerfile and
// docker-compose.yml (no Docker engine runs here) and checks them against
// what the binary accepts: every PIN_* variable they set passes config.Load
// for the command the service runs, the HTTP port is the one exposed and
// published on this machine's loopback, the health checks call the binary
// the image installs, the image runs as non-root from digest-pinned bases,
// compose's other images are digest-pinned, and the image is built without
// the test broker and with a real version.
func TestContainerFilesAgreeWithTheConfiguration(t *testing.T) {
	t.Parallel()
	d := readDockerfile(t)
	for _, from := range d.froms {
		require.Regexp(t, `@sha256:[0-9a-f]{64}$`, from, "base image pinned by digest")
	}
	require.NotEmpty(t, d.user)
	require.NotContains(t, []string{"root", "0", "0:0"}, d.user, "runs as non-root")
	require.Contains(t, d.build, "-tags production", "the image carries no test broker")
	require.Contains(t, d.build, "-X github.com/pinmarket/pin/platform/buildinfo.linkedVersion=${VERSION}", "the image carries the real version")
	require.Contains(t, d.build, "-X github.com/pinmarket/pin/platform/buildinfo.linkedRevision=${REVISION}", "and its commit")
	goMod, err := os.ReadFile("../../go.mod")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^toolchain go1\.\d+\.\d+$`, string(goMod), "go.mod names the patched Go")
	require.Equal(t, "auto", d.buildToolchain, "the image compiles with go.mod's toolchain, not the golang image's own (GOTOOLCHAIN=local)")
	require.Len(t, d.entrypoint, 1)
	binary := d.entrypoint[0]
	require.Equal(t, []string{binary, "healthcheck"}, d.healthArgs)

	raw, err := os.ReadFile("../../docker-compose.yml")
	require.NoError(t, err)
	var compose composeFile
	require.NoError(t, yaml.Unmarshal(raw, &compose))
	needs := map[string]config.Requirement{
		"serve":             config.NeedKafka | config.NeedJWTSecret,
		"migrate":           0,
		"kafka":             config.NeedKafka,
		"healthcheck":       0,
		"expire-promotions": 0,
	}
	var pinServices []string
	for name, svc := range compose.Services {
		for _, p := range svc.Ports {
			require.True(t, strings.HasPrefix(p, "127.0.0.1:"), "%s publishes %q beyond this machine's loopback", name, p)
		}
		if svc.Build == nil {
			require.Regexp(t, `^[^@\s]+:[^@\s]+@sha256:[0-9a-f]{64}$`, svc.Image, "%s's image is pinned by digest, its tag kept", name)
			continue
		}
		pinServices = append(pinServices, name)
		require.NotEmpty(t, svc.Command, name)
		need, ok := needs[svc.Command[0]]
		require.True(t, ok, "%s runs an unknown command %q", name, svc.Command[0])

		env := map[string]string{}
		for k, v := range d.env {
			env[k] = v
		}
		for k, v := range svc.Environment {
			env[k] = interpolation.ReplaceAllString(v, "$1")
		}
		var environ []string
		for k, v := range env {
			require.True(t, strings.HasPrefix(k, "PIN_"), "%s sets %s", name, k)
			environ = append(environ, k+"="+v)
		}
		cfg, err := config.Load(environ, need)
		require.NoError(t, err, "service %s", name)
		for k := range env {
			require.True(t, knownVariable(k), "%s sets %s, which pin does not read", name, k)
		}

		if svc.Command[0] != "serve" {
			continue
		}
		host, port, err := net.SplitHostPort(cfg.HTTPAddr)
		require.NoError(t, err)
		require.Equal(t, "0.0.0.0", host, "%s must listen on all interfaces inside the container", name)
		require.Equal(t, "0.0.0.0:"+port, d.env["PIN_HTTP_ADDR"], "the image listens where compose expects")
		require.Contains(t, d.expose, port, "the image exposes the HTTP port")
		var published []string
		for _, p := range svc.Ports {
			parts := strings.Split(p, ":")
			published = append(published, parts[len(parts)-1])
		}
		require.Contains(t, published, port, "%s publishes its HTTP port", name)
		require.Equal(t, []string{"CMD", binary, "healthcheck"}, svc.Healthcheck.Test, "%s health check runs the image's binary", name)
	}
	slices.Sort(pinServices)
	require.Equal(t, []string{"kafka-init", "migrate", "pin"}, pinServices, "the services built from the Dockerfile")
	requireComposePostgresAgrees(t, compose)
}

// requireComposePostgresAgrees checks compose's PostgreSQL against the URLs
// that use it: no password any URL lacks (trust, as PIN_DATABASE_URL's
// default assumes), and not published over a local server's port 5432.
func requireComposePostgresAgrees(t *testing.T, compose composeFile) {
	t.Helper()
	pg, ok := compose.Services["postgres"]
	require.True(t, ok, "a postgres service")
	require.Equal(t, "trust", pg.Environment["POSTGRES_HOST_AUTH_METHOD"], "the URLs carry no password")
	require.Empty(t, pg.Environment["POSTGRES_PASSWORD"])
	for name, svc := range compose.Services {
		if u, ok := svc.Environment["PIN_DATABASE_URL"]; ok {
			require.Regexp(t, `^postgres://postgres@postgres:5432/`, u, "%s reaches compose's PostgreSQL as its user, without a password", name)
		}
	}
	for _, p := range pg.Ports {
		parts := strings.Split(p, ":")
		require.GreaterOrEqual(t, len(parts), 3, "postgres published on an explicit host address: %q", p)
		require.NotEqual(t, "5432", parts[len(parts)-2], "postgres published over a local server's port: %q", p)
	}
}

// knownVariable reports whether config.Config reads name.
func knownVariable(name string) bool {
	typ := reflect.TypeOf(config.Config{})
	for i := range typ.NumField() {
		if typ.Field(i).Tag.Get("env") == name {
			return true
		}
	}
	return false
}
