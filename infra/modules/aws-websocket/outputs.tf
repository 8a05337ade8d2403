output "websocket_url" {
  description = "Herald's WebSocket URL (wss://…/<stage>)."
  value       = "${aws_apigatewayv2_api.websocket.api_endpoint}/${aws_apigatewayv2_stage.websocket.name}"
}

output "api_id" {
  description = "The WebSocket API's id."
  value       = aws_apigatewayv2_api.websocket.id
}

output "function_name" {
  description = "The WebSocket Lambda function."
  value       = aws_lambda_function.websocket.function_name
}
