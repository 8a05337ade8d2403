package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2"
	"github.com/hashicorp/hcl/v2/hclparse"
	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/stretchr/testify/require"

	"github.com/heraldevents/herald/functions/config"
	"github.com/heraldevents/herald/functions/health"
	"github.com/heraldevents/herald/functions/jobs"
	"github.com/heraldevents/herald/functions/router"
)

// tfModule is one directory of .tf files, parsed.
type tfModule struct {
	dir    string
	bodies []*hclsyntax.Body
}

// parseInfra parses every .tf file under ../infra with hclparse and groups
// them by directory (a Terraform module).
func parseInfra(t *testing.T) map[string]*tfModule {
	t.Helper()
	p := hclparse.NewParser()
	mods := map[string]*tfModule{}
	err := filepath.WalkDir("../infra", func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".tf" {
			return err
		}
		f, diags := p.ParseHCLFile(path)
		require.False(t, diags.HasErrors(), "%s: %s", path, diags.Error())
		dir := filepath.Dir(path)
		if mods[dir] == nil {
			mods[dir] = &tfModule{dir: dir}
		}
		mods[dir].bodies = append(mods[dir].bodies, f.Body.(*hclsyntax.Body))
		return nil
	})
	require.NoError(t, err)
	require.Contains(t, mods, filepath.Join("..", "infra", "modules", "herald"))
	require.Contains(t, mods, filepath.Join("..", "infra", "examples", "gcp"))
	return mods
}

// blocks returns the top-level blocks of type typ in m.
func (m *tfModule) blocks(typ string) []*hclsyntax.Block {
	var out []*hclsyntax.Block
	for _, b := range m.bodies {
		for _, blk := range b.Blocks {
			if blk.Type == typ {
				out = append(out, blk)
			}
		}
	}
	return out
}

// traversals returns every variable reference in m: "var.x", "local.y",
// "module.z", "google_x.y", ….
func (m *tfModule) traversals() []hcl.Traversal {
	var out []hcl.Traversal
	var walk func(b *hclsyntax.Body)
	walk = func(b *hclsyntax.Body) {
		for _, a := range b.Attributes {
			out = append(out, a.Expr.Variables()...)
		}
		for _, blk := range b.Blocks {
			walk(blk.Body)
		}
	}
	for _, b := range m.bodies {
		walk(b)
	}
	return out
}

func rootAttr(tr hcl.Traversal) (root, attr string) {
	root = tr.RootName()
	if len(tr) > 1 {
		if a, ok := tr[1].(hcl.TraverseAttr); ok {
			attr = a.Name
		}
	}
	return root, attr
}

// TestTerraformVariablesAreDeclaredAndUsed: in every module, each declared
// variable is used, each var.X used is declared, and outputs exist.
func TestTerraformVariablesAreDeclaredAndUsed(t *testing.T) {
	t.Parallel()
	for dir, m := range parseInfra(t) {
		declared := map[string]bool{}
		for _, v := range m.blocks("variable") {
			require.Len(t, v.Labels, 1)
			declared[v.Labels[0]] = true
			_, hasDesc := v.Body.Attributes["description"]
			require.True(t, hasDesc, "%s: variable %s has a description", dir, v.Labels[0])
		}
		used := map[string]bool{}
		for _, tr := range m.traversals() {
			if root, attr := rootAttr(tr); root == "var" {
				used[attr] = true
				require.True(t, declared[attr], "%s: var.%s is used but not declared", dir, attr)
			}
		}
		for name := range declared {
			require.True(t, used[name], "%s: variable %q is declared but never used", dir, name)
		}
		require.NotEmpty(t, m.blocks("output"), "%s has outputs", dir)
		for _, o := range m.blocks("output") {
			_, ok := o.Body.Attributes["value"]
			require.True(t, ok, "%s: output %s has a value", dir, o.Labels[0])
		}
	}
}

// TestTerraformExampleSetsEveryRequiredInput: the example root passes the
// module every variable that has no default, and nothing it lacks; its
// outputs name module outputs that exist.
func TestTerraformExampleSetsEveryRequiredInput(t *testing.T) {
	t.Parallel()
	mods := parseInfra(t)
	mod := mods[filepath.Join("..", "infra", "modules", "herald")]
	ex := mods[filepath.Join("..", "infra", "examples", "gcp")]
	inputs := map[string]bool{}
	var required []string
	for _, v := range mod.blocks("variable") {
		inputs[v.Labels[0]] = true
		if _, ok := v.Body.Attributes["default"]; !ok {
			required = append(required, v.Labels[0])
		}
	}
	outputs := map[string]bool{}
	for _, o := range mod.blocks("output") {
		outputs[o.Labels[0]] = true
	}
	calls := ex.blocks("module")
	require.Len(t, calls, 1)
	var given []string
	for name := range calls[0].Body.Attributes {
		if name == "source" {
			continue
		}
		require.True(t, inputs[name], "the example sets %q, which the module does not declare", name)
		given = append(given, name)
	}
	for _, r := range required {
		require.Contains(t, given, r, "the example sets required input %q", r)
	}
	for _, tr := range ex.traversals() {
		if root, attr := rootAttr(tr); root == "module" {
			require.Equal(t, "herald", attr)
			out, ok := tr[2].(hcl.TraverseAttr)
			require.True(t, ok)
			require.True(t, outputs[out.Name], "module.herald.%s is an output of the module", out.Name)
		}
	}
}

// TestTerraformCloudRunEnvironmentMatchesTheCode: the container's
// environment sets exactly the variables the Cloud Run server reads for
// its HERALD_FUNCTION and a deployment must set; PORT is Cloud Run's.
func TestTerraformCloudRunEnvironmentMatchesTheCode(t *testing.T) {
	t.Parallel()
	mod := parseInfra(t)[filepath.Join("..", "infra", "modules", "herald")]
	var services []*hclsyntax.Block
	for _, r := range mod.blocks("resource") {
		if r.Labels[0] == "google_cloud_run_v2_service" {
			services = append(services, r)
		}
	}
	require.Len(t, services, 1)
	tmpl := child(t, services[0].Body, "template")
	containers := children(tmpl.Body, "containers")
	require.Len(t, containers, 1)

	env := map[string]hclsyntax.Expression{}
	for _, e := range children(containers[0].Body, "env") {
		name := literal(t, e.Body.Attributes["name"].Expr)
		_, dup := env[name]
		require.False(t, dup, "env %s is set twice", name)
		if a, ok := e.Body.Attributes["value"]; ok {
			env[name] = a.Expr
		} else {
			require.NotEmpty(t, children(e.Body, "value_source"), "env %s has a value or a value_source", name)
			env[name] = nil
		}
	}
	fnExpr, ok := env[config.EnvFunction]
	require.True(t, ok, "HERALD_FUNCTION is set")
	fn, err := config.ParseFunction(literal(t, fnExpr))
	require.NoError(t, err)

	var want, got []string
	for _, v := range config.ReadBy(config.CloudRun, fn) {
		if v.Deploy {
			want = append(want, v.Name)
		}
	}
	for name := range env {
		got = append(got, name)
	}
	sort.Strings(got)
	require.ElementsMatch(t, want, got, "Cloud Run environment vs config.ReadBy(CloudRun, %s)", fn)
	require.NotContains(t, got, config.EnvPort, "Cloud Run reserves PORT")

	// HTTP/2 end to end (native gRPC streams) is a switch: a port named
	// h2c, present only when var.http2_end_to_end is set.
	var h2c *hclsyntax.Block
	for _, d := range children(containers[0].Body, "dynamic") {
		if d.Labels[0] == "ports" {
			h2c = d
		}
	}
	require.NotNil(t, h2c, "a dynamic ports block")
	var switches []string
	for _, tr := range h2c.Body.Attributes["for_each"].Expr.Variables() {
		root, attr := rootAttr(tr)
		switches = append(switches, root+"."+attr)
	}
	require.Equal(t, []string{"var.http2_end_to_end"}, switches)
	content := child(t, h2c.Body, "content")
	require.Equal(t, "h2c", literal(t, content.Body.Attributes["name"].Expr))
	require.Nil(t, env[config.EnvTokens], "tokens come from Secret Manager, not a plain value")
}

// TestTerraformSchedulerCallsTheJobRoute: the scheduler job POSTs to the
// jobs route of a known job with a bearer token.
func TestTerraformSchedulerCallsTheJobRoute(t *testing.T) {
	t.Parallel()
	mod := parseInfra(t)[filepath.Join("..", "infra", "modules", "herald")]
	found := 0
	for _, r := range mod.blocks("resource") {
		if r.Labels[0] != "google_cloud_scheduler_job" {
			continue
		}
		found++
		target := child(t, r.Body, "http_target")
		require.Equal(t, "POST", literal(t, target.Body.Attributes["http_method"].Expr))
		uri, ok := target.Body.Attributes["uri"].Expr.(*hclsyntax.TemplateExpr)
		require.True(t, ok, "uri is a template")
		last, ok := uri.Parts[len(uri.Parts)-1].(*hclsyntax.LiteralValueExpr)
		require.True(t, ok)
		suffix := last.Val.AsString()
		job, ok := strings.CutPrefix(suffix, "/v1/jobs/")
		require.True(t, ok, "uri ends in /v1/jobs/<job>, got %q", suffix)
		require.Contains(t, jobs.Names(), job)
		headers, ok := target.Body.Attributes["headers"]
		require.True(t, ok)
		obj, ok := headers.Expr.(*hclsyntax.ObjectConsExpr)
		require.True(t, ok)
		require.Len(t, obj.Items, 1)
		require.Equal(t, "Authorization", literal(t, obj.Items[0].KeyExpr))
	}
	require.Equal(t, len(jobs.Names()), found, "one scheduler job per job")
}

func children(b *hclsyntax.Body, typ string) []*hclsyntax.Block {
	var out []*hclsyntax.Block
	for _, blk := range b.Blocks {
		if blk.Type == typ {
			out = append(out, blk)
		}
	}
	return out
}

func child(t *testing.T, b *hclsyntax.Body, typ string) *hclsyntax.Block {
	t.Helper()
	cs := children(b, typ)
	require.Len(t, cs, 1, "one %s block", typ)
	return cs[0]
}

// literal evaluates a constant expression (a quoted string, or a bare
// object key) to its string value.
func literal(t *testing.T, e hclsyntax.Expression) string {
	t.Helper()
	if k, ok := e.(*hclsyntax.ObjectConsKeyExpr); ok {
		if name := hcl.ExprAsKeyword(k.Wrapped); name != "" {
			return name
		}
		e = k.Wrapped
	}
	v, diags := e.Value(nil)
	require.False(t, diags.HasErrors(), "a constant expression: %s", diags.Error())
	return v.AsString()
}

// TestDockerfileBuildsTheCloudRunBuild: the image the Terraform module
// deploys is built like `make cloudrun`, with the Google Cloud build's
// tags (CLOUDRUN_TAGS), by default.
func TestDockerfileBuildsTheCloudRunBuild(t *testing.T) {
	t.Parallel()
	mk, err := os.ReadFile("../Makefile")
	require.NoError(t, err)
	m := regexp.MustCompile(`(?m)^CLOUDRUN_TAGS\s*:=\s*(\S+)\s*$`).FindSubmatch(mk)
	require.NotNil(t, m, "the Makefile sets CLOUDRUN_TAGS")
	require.Equal(t, "herald_gcp", string(m[1]))
	require.Regexp(t, `(?m)^\t.*\$\(CLOUDRUN_FLAGS\) -o dist/cloudrun-`, string(mk), "make cloudrun builds with CLOUDRUN_FLAGS")
	require.Regexp(t, `(?m)^CLOUDRUN_FLAGS\s*:=\s*-tags \$\(CLOUDRUN_TAGS\) `, string(mk))

	df, err := os.ReadFile("../Dockerfile")
	require.NoError(t, err)
	require.Regexp(t, `(?m)^ARG HERALD_TAGS=`+regexp.QuoteMeta(string(m[1]))+`$`, string(df))
	require.Regexp(t, `(?m)go build -tags "\$\{HERALD_TAGS\}" .* \./functions/cmd/cloudrun$`, string(df))
}

// TestTerraformCloudRunProbes: Cloud Run starts sending traffic once
// GET /health/ready answers (the broker and the store both reachable),
// and restarts an instance whose GET /health stops answering; both paths
// are public routes of the router (probes carry no token), and the
// liveness probe is the cheap one, so an outage of a dependency does not
// make Cloud Run restart every instance.
func TestTerraformCloudRunProbes(t *testing.T) {
	t.Parallel()
	mod := parseInfra(t)[filepath.Join("..", "infra", "modules", "herald")]
	var services []*hclsyntax.Block
	for _, r := range mod.blocks("resource") {
		if r.Labels[0] == "google_cloud_run_v2_service" {
			services = append(services, r)
		}
	}
	require.Len(t, services, 1)
	containers := children(child(t, services[0].Body, "template").Body, "containers")
	require.Len(t, containers, 1)
	public := map[string]bool{}
	for _, r := range router.Routes() {
		if r.Public && r.Method == "GET" {
			public[r.Path] = true
		}
	}
	for probe, want := range map[string]string{"startup_probe": health.ReadyPath, "liveness_probe": health.LivePath} {
		p := child(t, containers[0].Body, probe)
		path := literal(t, child(t, p.Body, "http_get").Body.Attributes["path"].Expr)
		require.Equal(t, want, path, probe)
		require.True(t, public[path], "%s: %s is a public GET route", probe, path)
		_, ok := p.Body.Attributes["timeout_seconds"]
		require.True(t, ok, "%s sets timeout_seconds", probe)
	}
}

// TestTerraformFirestoreTTLPolicy: the Firestore collection expires
// idempotency-key records by their "expire_at" timestamp, the field
// leasestore writes for it.
func TestTerraformFirestoreTTLPolicy(t *testing.T) {
	t.Parallel()
	mod := parseInfra(t)[filepath.Join("..", "infra", "modules", "herald")]
	found := 0
	for _, r := range mod.blocks("resource") {
		if r.Labels[0] != "google_firestore_field" {
			continue
		}
		found++
		require.Equal(t, "expire_at", literal(t, r.Body.Attributes["field"].Expr))
		require.Len(t, children(r.Body, "ttl_config"), 1)
	}
	require.Equal(t, 1, found)
}
