package deploy_test

import (
	"encoding/json"
	"go/build"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/awslabs/goformation/v7"
	"github.com/awslabs/goformation/v7/cloudformation"
	"github.com/awslabs/goformation/v7/intrinsics"
	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/functions/jobs"
	"github.com/heraldevents/herald/functions/router"
	"github.com/heraldevents/herald/pubsubx/awssnssqs"
)

const templatePath = "../template.yaml"

// rawTemplate is template.yaml read with a plain YAML parser, for what
// goformation cannot type: Number parameters and ScheduleV2 events.
type rawTemplate struct {
	Parameters map[string]struct {
		Type    string    `yaml:"Type"`
		Default yaml.Node `yaml:"Default"`
	} `yaml:"Parameters"`
	Resources map[string]struct {
		Type       string `yaml:"Type"`
		Properties struct {
			Events map[string]struct {
				Type       string         `yaml:"Type"`
				Properties map[string]any `yaml:"Properties"`
			} `yaml:"Events"`
		} `yaml:"Properties"`
	} `yaml:"Resources"`
}

func readRaw(t *testing.T) rawTemplate {
	t.Helper()
	b, err := os.ReadFile(templatePath)
	require.NoError(t, err)
	var raw rawTemplate
	require.NoError(t, yaml.Unmarshal(b, &raw))
	return raw
}

// openTemplate parses template.yaml with goformation. goformation resolves
// a Ref to a parameter to the parameter's default, and a Number default
// becomes a JSON number that its map[string]string Environment.Variables
// cannot hold, so Number parameters are given their defaults as strings.
//
// goformation's YAML parsing shares global state between calls, so the
// template is parsed once and the result shared (read-only) by the tests.
func openTemplate(t *testing.T) *cloudformation.Template {
	t.Helper()
	tmpl, err := parsedTemplate()
	require.NoError(t, err)
	return tmpl
}

var parsedTemplate = sync.OnceValues(func() (*cloudformation.Template, error) {
	b, err := os.ReadFile(templatePath)
	if err != nil {
		return nil, err
	}
	var raw rawTemplate
	if err := yaml.Unmarshal(b, &raw); err != nil {
		return nil, err
	}
	overrides := map[string]any{}
	for name, p := range raw.Parameters {
		if p.Type == "Number" {
			overrides[name] = p.Default.Value
		}
	}
	return goformation.ParseYAMLWithOptions(b, &intrinsics.ProcessorOptions{ParameterOverrides: overrides})
})

// samFunction is a Lambda function of the template as the tests see it.
type samFunction struct {
	logicalID string
	function  config.Function
	env       map[string]string
	routes    []string // "METHOD /path"
}

// globalEnv returns the variables of the template's Globals.Function
// environment, which SAM merges into every function's own.
func globalEnv(t *testing.T, tmpl *cloudformation.Template) map[string]string {
	t.Helper()
	b, err := json.Marshal(tmpl.Globals["Function"])
	require.NoError(t, err)
	var g struct {
		Environment struct{ Variables map[string]string }
	}
	require.NoError(t, json.Unmarshal(b, &g))
	return g.Environment.Variables
}

func samFunctions(t *testing.T, tmpl *cloudformation.Template) []samFunction {
	t.Helper()
	raw := readRaw(t)
	globals := globalEnv(t, tmpl)
	var out []samFunction
	for id, f := range tmpl.GetAllServerlessFunctionResources() {
		require.NotNil(t, f.Environment, "%s has an environment", id)
		fn, err := config.ParseFunction(f.Environment.Variables[config.EnvFunction])
		require.NoError(t, err, "%s: %s", id, config.EnvFunction)
		env := maps.Clone(globals)
		if env == nil {
			env = map[string]string{}
		}
		for name, v := range f.Environment.Variables {
			_, both := globals[name]
			require.False(t, both, "%s sets %s, which Globals sets for every function", id, name)
			env[name] = v
		}
		sf := samFunction{logicalID: id, function: fn, env: env}
		for name, ev := range f.Events {
			if ev.Type != "HttpApi" {
				continue
			}
			p := ev.Properties.HttpApiEvent
			require.NotNil(t, p, "%s.%s", id, name)
			require.NotNil(t, p.Method, "%s.%s has a method", id, name)
			require.NotNil(t, p.Path, "%s.%s has a path", id, name)
			// goformation resolves a Ref to a resource to nil: read the raw YAML.
			require.Equal(t, "HttpApi", raw.Resources[id].Properties.Events[name].Properties["ApiId"], "%s.%s is on the HTTP API", id, name)
			sf.routes = append(sf.routes, *p.Method+" "+*p.Path)
		}
		out = append(out, sf)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].logicalID < out[j].logicalID })
	return out
}

// TestSAMFunctionsSetExactlyWhatTheCodeReads: every variable the Lambda
// bootstrap reads for a function (and a deployment must set) is set, and
// nothing else is.
func TestSAMFunctionsSetExactlyWhatTheCodeReads(t *testing.T) {
	t.Parallel()
	fs := samFunctions(t, openTemplate(t))
	var seen []config.Function
	for _, f := range fs {
		seen = append(seen, f.function)
		var want, read []string
		for _, v := range config.ReadBy(config.Lambda, f.function) {
			read = append(read, v.Name)
			if v.Deploy {
				want = append(want, v.Name)
			}
		}
		var got []string
		for name := range f.env {
			got = append(got, name)
			require.Contains(t, read, name, "%s sets %s, which HERALD_FUNCTION=%s does not read", f.logicalID, name, f.function)
		}
		require.ElementsMatch(t, want, got, "%s environment", f.logicalID)
	}
	require.ElementsMatch(t, config.Functions(), seen, "one Lambda function per Herald function")
}

// TestSAMTelemetryIsDocumented: the OpenTelemetry variables are set
// once, in Globals, each from a parameter whose description names it;
// the Prometheus exporter's are not (nothing scrapes a frozen function).
func TestSAMTelemetryIsDocumented(t *testing.T) {
	t.Parallel()
	tmpl := openTemplate(t)
	globals := globalEnv(t, tmpl)
	var otel []string
	for _, v := range config.Vars() {
		if strings.HasPrefix(v.Name, "OTEL_") && v.ReadBy(config.Lambda, config.All) {
			otel = append(otel, v.Name)
		}
	}
	require.NotEmpty(t, otel)
	require.ElementsMatch(t, otel, slices.Collect(maps.Keys(globals)), "Globals sets the OpenTelemetry variables")
	require.NotContains(t, globals, config.EnvOTelPrometheusHost)
	b, err := os.ReadFile(templatePath)
	require.NoError(t, err)
	var doc struct {
		Parameters map[string]struct {
			Description string `yaml:"Description"`
		} `yaml:"Parameters"`
		Globals struct {
			Function struct {
				Environment struct {
					Variables map[string]yaml.Node `yaml:"Variables"`
				} `yaml:"Environment"`
			} `yaml:"Function"`
		} `yaml:"Globals"`
	}
	require.NoError(t, yaml.Unmarshal(b, &doc))
	for name, node := range doc.Globals.Function.Environment.Variables {
		require.Equal(t, "!Ref", node.Tag, "%s comes from a parameter", name)
		p, ok := doc.Parameters[node.Value]
		require.True(t, ok, "%s: parameter %s", name, node.Value)
		require.Contains(t, p.Description, name, "parameter %s says which variable it sets", node.Value)
	}
}

// TestSAMRoutesMatchTheRouter: each function's HTTP API routes are exactly
// the routes its HERALD_FUNCTION serves; GET /health is on one of them.
func TestSAMRoutesMatchTheRouter(t *testing.T) {
	t.Parallel()
	fs := samFunctions(t, openTemplate(t))
	shared := map[string]int{}
	for _, f := range fs {
		var want []string
		for _, r := range router.Routes() {
			if r.Function == f.function {
				want = append(want, r.Method+" "+r.Path)
			}
		}
		var own []string
		for _, r := range f.routes {
			if isShared(r) {
				shared[r]++
			} else {
				own = append(own, r)
			}
		}
		require.ElementsMatch(t, want, own, "%s routes", f.logicalID)
	}
	for _, r := range router.Routes() {
		if r.Function == config.All {
			require.Equal(t, 1, shared[r.Method+" "+r.Path], "%s %s is routed to exactly one function", r.Method, r.Path)
		}
	}
}

func isShared(route string) bool {
	for _, r := range router.Routes() {
		if r.Function == config.All && r.Method+" "+r.Path == route {
			return true
		}
	}
	return false
}

// TestDocumentedEndpointsAreRouted: every endpoint in the REST table of
// docs/api.md has a route in the router (and so, by the test above, in the
// template), and every route is documented.
func TestDocumentedEndpointsAreRouted(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile("../docs/api.md")
	require.NoError(t, err)
	readme := string(b)
	i := strings.Index(readme, "## REST endpoints")
	require.GreaterOrEqual(t, i, 0)
	section := readme[i+3:]
	section = section[:strings.Index(section, "\n## ")]
	cell := regexp.MustCompile(`(?m)^\| ([^|]+) \|`)
	ep := regexp.MustCompile("`(?:(GET|POST|DELETE|PUT|PATCH) )?(/[^`]*)`")
	var documented []string
	for _, row := range cell.FindAllStringSubmatch(section, -1) {
		method, base := "", ""
		for _, m := range ep.FindAllStringSubmatch(row[1], -1) {
			path := m[2]
			if m[1] != "" {
				method, base = m[1], path
			} else if base != "" {
				// "`/resume`" after "`POST /v1/.../{id}/pause`" replaces the last segment.
				path = base[:strings.LastIndex(base, "/")] + path
			}
			if method != "" {
				documented = append(documented, method+" "+strings.SplitN(path, "?", 2)[0])
			}
		}
	}
	var routed []string
	for _, r := range router.Routes() {
		routed = append(routed, r.Method+" "+r.Path)
	}
	require.ElementsMatch(t, routed, documented, "docs/api.md REST endpoints vs router.Routes")
}

// TestSAMBuildProducesTheHandler: every function builds with the Makefile
// (BuildMethod makefile) into the handler the template names, from a
// main package that exists.
func TestSAMBuildProducesTheHandler(t *testing.T) {
	t.Parallel()
	tmpl := openTemplate(t)
	g, err := tmpl.Globals["Function"], error(nil)
	require.NoError(t, err)
	b, err := json.Marshal(g)
	require.NoError(t, err)
	var globals struct {
		CodeUri, Handler, Runtime string
		Architectures             []string
	}
	require.NoError(t, json.Unmarshal(b, &globals))
	require.Equal(t, "provided.al2023", globals.Runtime)
	require.Equal(t, "bootstrap", globals.Handler, "provided runtimes run the executable named bootstrap")
	require.Equal(t, []string{"arm64"}, globals.Architectures)

	codeDir := filepath.Join("..", globals.CodeUri)
	st, err := os.Stat(codeDir)
	require.NoError(t, err)
	require.True(t, st.IsDir())
	mk, err := os.ReadFile(filepath.Join(codeDir, "Makefile"))
	require.NoError(t, err)
	makefile := string(mk)
	m := regexp.MustCompile(`(?m)^SAM_FUNCTIONS\s*:=\s*(.+)$`).FindStringSubmatch(makefile)
	require.NotNil(t, m, "the Makefile lists SAM_FUNCTIONS")
	targets := strings.Fields(m[1])
	recipe := regexp.MustCompile(`(?m)^\$\(addprefix build-,\$\(SAM_FUNCTIONS\)\):\n\t(.+)$`).FindStringSubmatch(makefile)
	require.NotNil(t, recipe, "the Makefile has the build-<LogicalId> rule")
	require.Contains(t, recipe[1], "GOARCH=arm64")
	require.Contains(t, recipe[1], "$(LAMBDA_FLAGS)", "sam build builds what make lambda builds")
	require.Regexp(t, `(?m)^LAMBDA_FLAGS\s*:=\s*-tags \$\(LAMBDA_TAGS\) `, makefile)
	lambdaTags := regexp.MustCompile(`(?m)^LAMBDA_TAGS\s*:=\s*(\S+)\s*$`).FindStringSubmatch(makefile)
	require.NotNil(t, lambdaTags, "the Makefile sets LAMBDA_TAGS")
	require.ElementsMatch(t, []string{"lambda.norpc", "herald_aws"}, strings.Split(lambdaTags[1], ","),
		"the bootstrap is the AWS build, without the RPC runtime")
	require.Contains(t, recipe[1], "-o $(ARTIFACTS_DIR)/"+globals.Handler+" ")
	pkgPath := regexp.MustCompile(`\./\S+$`).FindString(recipe[1])
	require.NotEmpty(t, pkgPath)
	pkg, err := build.ImportDir(filepath.Join(codeDir, pkgPath), 0)
	require.NoError(t, err)
	require.Equal(t, "main", pkg.Name, "%s is a command", pkgPath)
	require.Contains(t, pkg.Imports, "github.com/aws/aws-lambda-go/lambda")

	for id, f := range tmpl.GetAllServerlessFunctionResources() {
		require.Equal(t, "makefile", f.AWSCloudFormationMetadata["BuildMethod"], id)
		require.Contains(t, targets, id, "make build-%s exists", id)
		require.Nil(t, f.CodeUri, "%s uses the global CodeUri", id)
		require.Nil(t, f.Handler, "%s uses the global handler", id)
	}
}

// TestSAMScheduleRunsAKnownJob: the jobs function has an EventBridge
// Scheduler schedule whose input is a job event lambdafn accepts.
func TestSAMScheduleRunsAKnownJob(t *testing.T) {
	t.Parallel()
	tmpl := openTemplate(t)
	raw := readRaw(t)
	found := 0
	for _, f := range samFunctions(t, tmpl) {
		for name, ev := range raw.Resources[f.logicalID].Properties.Events {
			if ev.Type != "ScheduleV2" {
				continue
			}
			require.Equal(t, config.Jobs, f.function, "%s.%s: only the jobs function runs jobs", f.logicalID, name)
			var in struct{ Job string }
			require.NoError(t, json.Unmarshal([]byte(ev.Properties["Input"].(string)), &in))
			require.Contains(t, jobs.Names(), in.Job)
			require.NotEmpty(t, ev.Properties["ScheduleExpression"])
			found++
		}
	}
	require.Equal(t, len(jobs.Names()), found, "one schedule per job")
}

// TestSAMTableAndTopic: the lease table is what leasestore/storeurl
// expects (partition key "key" of type S, on-demand, no TTL: the store
// defines none), and the topic name keeps the SQS queue names the driver
// makes inside the IAM prefix "<TopicName>-".
func TestSAMTableAndTopic(t *testing.T) {
	t.Parallel()
	tmpl := openTemplate(t)
	tbl, err := tmpl.GetDynamoDBTableWithName("LeaseTable")
	require.NoError(t, err)
	require.Equal(t, "PAY_PER_REQUEST", *tbl.BillingMode)
	require.Len(t, tbl.KeySchema, 1)
	require.Equal(t, "key", tbl.KeySchema[0].AttributeName)
	require.Equal(t, "HASH", tbl.KeySchema[0].KeyType)
	require.Len(t, tbl.AttributeDefinitions, 1)
	require.Equal(t, "S", tbl.AttributeDefinitions[0].AttributeType)
	// Idempotency keys expire by the TTL attribute leasestore writes.
	require.NotNil(t, tbl.TimeToLiveSpecification)
	require.True(t, tbl.TimeToLiveSpecification.Enabled)
	require.Equal(t, "ttl", *tbl.TimeToLiveSpecification.AttributeName)

	raw := readRaw(t)
	p, ok := raw.Parameters["TopicName"]
	require.True(t, ok)
	for _, topic := range []string{p.Default.Value, "abcdefghijklmnop", "a_b-C"} {
		sub := "herald-dc-" + uuid.NewString()
		require.True(t, strings.HasPrefix(awssnssqs.QueueName(topic, sub), topic+"-"),
			"queue of topic %q lies under the IAM prefix %q-*", topic, topic)
	}
	b, err := os.ReadFile(templatePath)
	require.NoError(t, err)
	require.True(t, slices.Contains(strings.Split(string(b), "\n"), `    AllowedPattern: "^[A-Za-z0-9_-]{1,16}$"`),
		"TopicName is limited to names QueueName keeps whole")
}
