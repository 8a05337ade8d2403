package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/hcl/v2/hclsyntax"
	"github.com/stretchr/testify/require"
	"go.yaml.in/yaml/v3"

	"github.com/heraldevents/herald/functions/config"
)

// wsTemplate is the WebSocket part of template.yaml, read with a plain
// YAML parser (goformation resolves the intrinsics these checks look at).
type wsTemplate struct {
	Resources map[string]struct {
		Type       string         `yaml:"Type"`
		Properties map[string]any `yaml:"Properties"`
	} `yaml:"Resources"`
	Outputs map[string]struct {
		Value string `yaml:"Value"`
	} `yaml:"Outputs"`
}

// yamlText returns the source text of an intrinsic ("!Sub …", "!Ref …").
func yamlText(t *testing.T, v any) string {
	t.Helper()
	b, err := yaml.Marshal(v)
	require.NoError(t, err)
	return string(b)
}

// TestSAMWebSocketAPI: a WEBSOCKET API whose $connect, $disconnect and
// $default routes all target one AWS_PROXY integration of the function
// with HERALD_FUNCTION=websocket, a stage that deploys itself, the
// permission for API Gateway to invoke it, the function's right to post
// to and delete connections of exactly that API and stage, and the
// wss:// URL as an output.
func TestSAMWebSocketAPI(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(templatePath)
	require.NoError(t, err)
	var tmpl wsTemplate
	require.NoError(t, yaml.Unmarshal(b, &tmpl))
	byType := map[string][]string{}
	for id, r := range tmpl.Resources {
		byType[r.Type] = append(byType[r.Type], id)
	}
	require.Len(t, byType["AWS::ApiGatewayV2::Api"], 1)
	apiID := byType["AWS::ApiGatewayV2::Api"][0]
	api := tmpl.Resources[apiID].Properties
	require.Equal(t, "WEBSOCKET", api["ProtocolType"])
	require.NotEmpty(t, api["RouteSelectionExpression"])

	require.Len(t, byType["AWS::ApiGatewayV2::Integration"], 1)
	integID := byType["AWS::ApiGatewayV2::Integration"][0]
	integ := tmpl.Resources[integID].Properties
	require.Equal(t, "AWS_PROXY", integ["IntegrationType"])
	require.Contains(t, yamlText(t, integ["IntegrationUri"]), "${WebSocketFunction.Arn}/invocations")

	var keys []string
	for _, id := range byType["AWS::ApiGatewayV2::Route"] {
		r := tmpl.Resources[id].Properties
		keys = append(keys, r["RouteKey"].(string))
		require.Contains(t, yamlText(t, r["ApiId"]), apiID)
		require.Contains(t, yamlText(t, r["Target"]), "integrations/${"+integID+"}", "%s targets the integration", id)
	}
	sort.Strings(keys)
	require.Equal(t, []string{"$connect", "$default", "$disconnect"}, keys)

	require.Len(t, byType["AWS::ApiGatewayV2::Stage"], 1)
	require.Equal(t, true, tmpl.Resources[byType["AWS::ApiGatewayV2::Stage"][0]].Properties["AutoDeploy"])

	found := false
	for _, id := range byType["AWS::Lambda::Permission"] {
		p := tmpl.Resources[id].Properties
		if p["Principal"] == "apigateway.amazonaws.com" && strings.Contains(yamlText(t, p["SourceArn"]), "${"+apiID+"}/*") {
			require.Contains(t, yamlText(t, p["FunctionName"]), "WebSocketFunction")
			found = true
		}
	}
	require.True(t, found, "API Gateway may invoke the WebSocket function")

	fn := tmpl.Resources["WebSocketFunction"].Properties
	env := fn["Environment"].(map[string]any)["Variables"].(map[string]any)
	require.Equal(t, string(config.Websocket), env[config.EnvFunction])
	for _, v := range []string{config.EnvWSPollWait, config.EnvWSSessionTTL, config.EnvStoreURL, config.EnvTopicURL, config.EnvTokens} {
		require.Contains(t, env, v)
	}
	require.LessOrEqual(t, fn["Timeout"], 29, "within API Gateway's integration timeout")
	policies := yamlText(t, fn["Policies"])
	for _, method := range []string{"POST", "DELETE"} {
		require.Contains(t, policies, "${"+apiID+"}/${WebSocketStageName}/"+method+"/@connections/*")
	}
	require.Contains(t, policies, "execute-api:ManageConnections")
	require.NotContains(t, policies, "execute-api:*")

	out, ok := tmpl.Outputs["WebSocketUrl"]
	require.True(t, ok)
	require.Regexp(t, regexp.MustCompile(`^wss://\$\{`+apiID+`\}\.execute-api\.`), out.Value)
}

// TestTerraformWebSocketAPI: infra/modules/aws-websocket declares the same
// API, routes, integration, stage, permission and IAM, and its function's
// environment is exactly what the Lambda bootstrap reads for
// HERALD_FUNCTION=websocket.
func TestTerraformWebSocketAPI(t *testing.T) {
	t.Parallel()
	mod := parseInfra(t)[filepath.Join("..", "infra", "modules", "aws-websocket")]
	require.NotNil(t, mod)
	res := map[string][]*hclsyntax.Block{}
	for _, r := range mod.blocks("resource") {
		res[r.Labels[0]] = append(res[r.Labels[0]], r)
	}
	require.Len(t, res["aws_apigatewayv2_api"], 1)
	require.Equal(t, "WEBSOCKET", literal(t, res["aws_apigatewayv2_api"][0].Body.Attributes["protocol_type"].Expr))
	require.Len(t, res["aws_apigatewayv2_integration"], 1)
	require.Equal(t, "AWS_PROXY", literal(t, res["aws_apigatewayv2_integration"][0].Body.Attributes["integration_type"].Expr))
	require.Len(t, res["aws_apigatewayv2_route"], 1)
	call, ok := res["aws_apigatewayv2_route"][0].Body.Attributes["for_each"].Expr.(*hclsyntax.FunctionCallExpr)
	require.True(t, ok && call.Name == "toset" && len(call.Args) == 1, "for_each = toset([...])")
	routes, diags := call.Args[0].Value(nil)
	require.False(t, diags.HasErrors(), diags.Error())
	var keys []string
	for _, v := range routes.AsValueSlice() {
		keys = append(keys, v.AsString())
	}
	sort.Strings(keys)
	require.Equal(t, []string{"$connect", "$default", "$disconnect"}, keys)
	require.Len(t, res["aws_apigatewayv2_stage"], 1)
	require.Len(t, res["aws_lambda_permission"], 1)
	require.Equal(t, "apigateway.amazonaws.com", literal(t, res["aws_lambda_permission"][0].Body.Attributes["principal"].Expr))

	require.Len(t, res["aws_lambda_function"], 1)
	envBlock := child(t, res["aws_lambda_function"][0].Body, "environment")
	obj, ok := envBlock.Body.Attributes["variables"].Expr.(*hclsyntax.ObjectConsExpr)
	require.True(t, ok, "environment.variables is an object")
	env := map[string]hclsyntax.Expression{}
	for _, item := range obj.Items {
		env[literal(t, item.KeyExpr)] = item.ValueExpr
	}
	require.Equal(t, string(config.Websocket), literal(t, env[config.EnvFunction]))
	var want, got []string
	for _, v := range config.ReadBy(config.Lambda, config.Websocket) {
		if v.Deploy {
			want = append(want, v.Name)
		}
	}
	for name := range env {
		got = append(got, name)
	}
	require.ElementsMatch(t, want, got, "the function's environment vs config.ReadBy(Lambda, websocket)")

	// The role may manage connections of this API's stage only, POST and
	// DELETE.
	src, err := os.ReadFile(filepath.Join(mod.dir, "main.tf"))
	require.NoError(t, err)
	require.Contains(t, string(src), `Action   = "execute-api:ManageConnections"`)
	require.Contains(t, string(src), `for method in ["POST", "DELETE"]`)
	require.Contains(t, string(src), `"${aws_apigatewayv2_api.websocket.execution_arn}/${var.stage_name}/${method}/@connections/*"`)
	require.NotContains(t, string(src), `execute-api:*`)
}
