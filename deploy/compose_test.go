package deploy

import (
	"context"
	"net/url"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/herr"
	"github.com/heraldevents/herald/leasestore/storeurl"
)

// composeFile is the self-hosted example: Herald ×2, PostgreSQL, RabbitMQ
// or NATS (docs/backends.md, "Run it yourself").
const composeFile = "compose/compose.yaml"

type composeService struct {
	Image string `yaml:"image"`
	Build *struct {
		Context    string `yaml:"context"`
		Dockerfile string `yaml:"dockerfile"`
	} `yaml:"build"`
	Command     []string                  `yaml:"command"`
	Environment map[string]string         `yaml:"environment"`
	DependsOn   map[string]map[string]any `yaml:"depends_on"`
	Ports       []string                  `yaml:"ports"`
	Volumes     []string                  `yaml:"volumes"`
	Healthcheck map[string]any            `yaml:"healthcheck"`
	Profiles    []string                  `yaml:"profiles"`
	Extra       map[string]any            `yaml:",inline"`
}

type compose struct {
	Name     string                    `yaml:"name"`
	Services map[string]composeService `yaml:"services"`
	Volumes  map[string]any            `yaml:"volumes"`
	Extra    map[string]any            `yaml:",inline"`
}

// defaultOf returns the default of a ${VAR:-default} value, or v itself.
func defaultOf(v string) string {
	if m := regexp.MustCompile(`^\$\{[A-Z_]+:-(.*)\}$`).FindStringSubmatch(v); m != nil {
		return m[1]
	}
	return v
}

// TestCompose holds deploy/compose/compose.yaml to the code, since no
// container engine runs in CI: it parses (YAML, merge keys), the Herald
// services build the local adapter and set only variables Herald reads,
// their store and broker URLs pass Herald's own URL checks and name the
// services, users, passwords and databases the file defines, and every
// dependency, volume and port is consistent.
func TestCompose(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(composeFile)
	require.NoError(t, err)
	var c compose
	dec := yaml.NewDecoder(strings.NewReader(string(b)))
	dec.KnownFields(true)
	require.NoError(t, dec.Decode(&c))
	for k := range c.Extra {
		require.True(t, strings.HasPrefix(k, "x-"), "top-level key %q: only extensions (x-…) besides name, services, volumes", k)
	}

	known := map[string]bool{"PGPASSWORD": true} // pgx reads it
	for _, v := range config.Vars() {
		known[v.Name] = true
	}
	pg := c.Services["postgres"]
	rabbit := c.Services["rabbitmq"]
	nats := c.Services["nats"]
	require.NotEmpty(t, pg.Image)
	require.NotEmpty(t, rabbit.Image)
	require.NotEmpty(t, nats.Image)
	require.Contains(t, nats.Command, "-js", "NATS runs JetStream")
	require.NotEmpty(t, pg.Healthcheck, "Herald waits for a healthy PostgreSQL")

	ports := map[string]bool{}
	heralds := 0
	for name, s := range c.Services {
		for _, v := range s.Volumes {
			vol, _, _ := strings.Cut(v, ":")
			require.Contains(t, c.Volumes, vol, "%s: volume %q is declared", name, vol)
		}
		for dep := range s.DependsOn {
			require.Contains(t, c.Services, dep, "%s depends on a service of the file", name)
		}
		if !strings.HasPrefix(name, "herald-") {
			continue
		}
		heralds++
		require.NotNil(t, s.Build, name)
		df, err := os.ReadFile(strings.TrimPrefix(s.Build.Dockerfile, "deploy/"))
		require.NoError(t, err, "%s: the Dockerfile is relative to the build context, the repository root", name)
		require.Equal(t, "../..", s.Build.Context)
		require.Contains(t, string(df), "./local/cmd/herald", "%s runs the local adapter (it runs the periodic jobs)", name)
		for _, p := range s.Ports {
			require.False(t, ports[p], "port %s published twice", p)
			ports[p] = true
		}
		for k := range s.Environment {
			require.True(t, known[k], "%s sets %s, which Herald does not read", name, k)
		}
		require.Equal(t, "service_healthy", s.DependsOn["postgres"]["condition"])

		env := s.Environment
		store, err := url.Parse(env[config.EnvStoreURL])
		require.NoError(t, err)
		require.Equal(t, "postgres", store.Scheme)
		require.Equal(t, "postgres:5432", store.Host)
		require.Equal(t, pg.Environment["POSTGRES_USER"], store.User.Username())
		require.Equal(t, "/"+pg.Environment["POSTGRES_DB"], store.Path)
		require.Equal(t, pg.Environment["POSTGRES_PASSWORD"], env["PGPASSWORD"])
		// Herald's own checks of the URL (parameters, table) run before it
		// connects: a cancelled context stops it there.
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		_, err = storeurl.Open(ctx, env[config.EnvStoreURL])
		require.NotEqual(t, herr.InvalidArgument, herr.CodeOf(err), "%v", err)

		topic, err := url.Parse(defaultOf(env[config.EnvTopicURL]))
		require.NoError(t, err)
		require.Equal(t, "rabbit", topic.Scheme)
		amqpURL, err := url.Parse(topic.Query().Get("url"))
		require.NoError(t, err)
		require.Equal(t, "rabbitmq:5672", amqpURL.Host)
		pass, _ := amqpURL.User.Password()
		require.Equal(t, rabbit.Environment["RABBITMQ_DEFAULT_USER"], amqpURL.User.Username())
		require.Equal(t, rabbit.Environment["RABBITMQ_DEFAULT_PASS"], pass)
		require.Contains(t, env[config.EnvDevToken], ":?", "the token must be given, never defaulted")
		require.Equal(t, "0.0.0.0:8080", env[config.EnvAddr])
	}
	require.GreaterOrEqual(t, heralds, 2, "several Herald processes share the store")
	require.Contains(t, string(b), "HERALD_TOPIC_URL=nats://nats:4222/", "the NATS alternative is documented in the file")
}
