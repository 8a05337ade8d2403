# Herald's API Gateway WebSocket API on AWS, the Terraform twin of the
# WebSocket part of template.yaml: one Lambda function
# (HERALD_FUNCTION=websocket) behind the routes $connect, $disconnect and
# $default, over the SNS topic and DynamoDB lease table of an existing
# Herald deployment (the SAM stack's outputs TopicArn and LeaseTableName).

data "aws_region" "current" {}
data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}

locals {
  sqs_prefix = "arn:${data.aws_partition.current.partition}:sqs:${data.aws_region.current.name}:${data.aws_caller_identity.current.account_id}:${var.topic_name}-*"
  connections = [
    for method in ["POST", "DELETE"] :
    "${aws_apigatewayv2_api.websocket.execution_arn}/${var.stage_name}/${method}/@connections/*"
  ]
}

resource "aws_iam_role" "websocket" {
  name = "${var.name}-websocket"
  assume_role_policy = jsonencode({
    Version = "2012-10-17"
    Statement = [{
      Effect    = "Allow"
      Principal = { Service = "lambda.amazonaws.com" }
      Action    = "sts:AssumeRole"
    }]
  })
}

resource "aws_iam_role_policy_attachment" "logs" {
  role       = aws_iam_role.websocket.name
  policy_arn = "arn:${data.aws_partition.current.partition}:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole"
}

# Only what the function's frames use, as in template.yaml.
resource "aws_iam_role_policy" "websocket" {
  name = "${var.name}-websocket"
  role = aws_iam_role.websocket.id
  policy = jsonencode({
    Version = "2012-10-17"
    Statement = [
      {
        # Leases, sessions and connection records; Scan: a dead_letters
        # stream lists the dead-letter queue.
        Effect   = "Allow"
        Action   = ["dynamodb:DescribeTable", "dynamodb:BatchGetItem", "dynamodb:PutItem", "dynamodb:DeleteItem", "dynamodb:Scan"]
        Resource = var.lease_table_arn
      },
      {
        Effect   = "Allow"
        Action   = ["sqs:GetQueueUrl", "sqs:ReceiveMessage", "sqs:DeleteMessage", "sqs:ChangeMessageVisibility", "sqs:CreateQueue", "sqs:DeleteQueue", "sqs:GetQueueAttributes", "sqs:SetQueueAttributes", "sqs:TagQueue", "sqs:ListQueueTags"]
        Resource = local.sqs_prefix
      },
      {
        # A fresh non-durable stream makes its queue's subscription.
        Effect   = "Allow"
        Action   = ["sns:CreateTopic", "sns:Subscribe", "sns:ListSubscriptionsByTopic"]
        Resource = var.topic_arn
      },
      {
        Effect   = "Allow"
        Action   = ["sns:Unsubscribe", "sns:SetSubscriptionAttributes"]
        Resource = [var.topic_arn, "${var.topic_arn}:*"]
      },
      {
        # PostToConnection, and DeleteConnection after a fatal error frame.
        Effect   = "Allow"
        Action   = "execute-api:ManageConnections"
        Resource = local.connections
      },
    ]
  })
}

resource "aws_lambda_function" "websocket" {
  function_name    = "${var.name}-websocket"
  role             = aws_iam_role.websocket.arn
  runtime          = "provided.al2023"
  handler          = "bootstrap"
  architectures    = [var.architecture]
  filename         = var.bootstrap_zip
  source_code_hash = filebase64sha256(var.bootstrap_zip)
  memory_size      = 256
  timeout          = 29

  environment {
    variables = {
      HERALD_FUNCTION              = "websocket"
      HERALD_TOKENS                = var.tokens
      HERALD_JWT_ISSUER            = var.jwt.issuer
      HERALD_JWT_JWKS_URL          = var.jwt.jwks_url
      HERALD_JWT_AUDIENCE          = var.jwt.audience
      HERALD_JWT_PERMISSIONS_CLAIM = var.jwt.permissions_claim
      HERALD_JWT_PRINCIPAL_CLAIM   = var.jwt.principal_claim
      HERALD_JWT_ALGORITHMS        = var.jwt.algorithms
      HERALD_JWT_SCOPE_PREFIX      = var.jwt.scope_prefix
      HERALD_JWT_GRANTS            = length(var.jwt.grants) == 0 ? "" : jsonencode(var.jwt.grants)
      HERALD_TOPIC_URL             = "awssnssqs:///${var.topic_name}"
      HERALD_STORE_URL             = "dynamodb://${var.lease_table_name}?partition_key=key"
      HERALD_MAX_LEASE_BYTES       = tostring(var.max_lease_bytes)
      HERALD_WS_POLL_WAIT          = var.poll_wait
      HERALD_WS_SESSION_TTL        = var.session_ttl
      # OpenTelemetry (docs/telemetry.md), from var.telemetry.
      OTEL_SDK_DISABLED           = var.telemetry.sdk_disabled
      OTEL_SERVICE_NAME           = var.telemetry.service_name
      OTEL_RESOURCE_ATTRIBUTES    = var.telemetry.resource_attributes
      OTEL_TRACES_EXPORTER        = var.telemetry.traces_exporter
      OTEL_METRICS_EXPORTER       = var.telemetry.metrics_exporter
      OTEL_EXPORTER_OTLP_ENDPOINT = var.telemetry.otlp_endpoint
      OTEL_EXPORTER_OTLP_PROTOCOL = var.telemetry.otlp_protocol
    }
  }
}

resource "aws_apigatewayv2_api" "websocket" {
  name          = "${var.name}-websocket"
  protocol_type = "WEBSOCKET"
  # Required for WEBSOCKET; no route but the three below exists, so every
  # frame goes to $default (the function routes frames by "type").
  route_selection_expression = "$request.body.type"
}

resource "aws_apigatewayv2_integration" "websocket" {
  api_id               = aws_apigatewayv2_api.websocket.id
  integration_type     = "AWS_PROXY"
  integration_uri      = aws_lambda_function.websocket.invoke_arn
  integration_method   = "POST"
  timeout_milliseconds = 29000
}

resource "aws_apigatewayv2_route" "websocket" {
  for_each           = toset(["$connect", "$disconnect", "$default"])
  api_id             = aws_apigatewayv2_api.websocket.id
  route_key          = each.value
  authorization_type = "NONE"
  target             = "integrations/${aws_apigatewayv2_integration.websocket.id}"
}

resource "aws_apigatewayv2_stage" "websocket" {
  api_id      = aws_apigatewayv2_api.websocket.id
  name        = var.stage_name
  auto_deploy = true
}

resource "aws_lambda_permission" "websocket" {
  statement_id  = "AllowWebSocketApiInvoke"
  action        = "lambda:InvokeFunction"
  function_name = aws_lambda_function.websocket.function_name
  principal     = "apigateway.amazonaws.com"
  source_arn    = "${aws_apigatewayv2_api.websocket.execution_arn}/*"
}
