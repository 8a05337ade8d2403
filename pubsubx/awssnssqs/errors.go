package awssnssqs

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/heraldevents/herald/herr"
)

// errorCodes is the one table from AWS error codes (SNS and SQS, in both
// the JSON and the query-compatible spelling) to herr codes. Codes not
// listed fall back on the HTTP status in mapErr.
var errorCodes = map[string]herr.Code{
	// Missing queue, topic or subscription.
	"QueueDoesNotExist":                       herr.NotFound,
	"AWS.SimpleQueueService.NonExistentQueue": herr.NotFound,
	"NotFound":                  herr.NotFound,
	"ResourceNotFound":          herr.NotFound,
	"ResourceNotFoundException": herr.NotFound,

	// A queue of that name exists with other attributes: another client
	// created it first (CreateSubscription sends a unique policy id).
	"QueueNameExists":                        herr.AlreadyExists,
	"QueueAlreadyExists":                     herr.AlreadyExists,
	"AWS.SimpleQueueService.QueueNameExists": herr.AlreadyExists,

	// SQS refuses a queue name for 60 s after it was deleted: retry later.
	"QueueDeletedRecently":                        herr.Unavailable,
	"AWS.SimpleQueueService.QueueDeletedRecently": herr.Unavailable,

	// Throttling and server-side trouble: retry with backoff.
	"Throttling":               herr.Unavailable,
	"ThrottlingException":      herr.Unavailable,
	"Throttled":                herr.Unavailable,
	"RequestThrottled":         herr.Unavailable,
	"RequestLimitExceeded":     herr.Unavailable,
	"TooManyRequestsException": herr.Unavailable,
	"KMSThrottling":            herr.Unavailable,
	"KmsThrottled":             herr.Unavailable,
	"ConcurrentAccess":         herr.Unavailable,
	"InternalError":            herr.Unavailable,
	"InternalFailure":          herr.Unavailable,
	"ServiceUnavailable":       herr.Unavailable,

	// Validation.
	"InvalidParameter":             herr.InvalidArgument,
	"InvalidParameterValue":        herr.InvalidArgument,
	"ParameterValueInvalid":        herr.InvalidArgument,
	"InvalidParameterCombination":  herr.InvalidArgument,
	"MissingParameter":             herr.InvalidArgument,
	"ValidationError":              herr.InvalidArgument,
	"ValidationException":          herr.InvalidArgument,
	"InvalidAttributeName":         herr.InvalidArgument,
	"InvalidAttributeValue":        herr.InvalidArgument,
	"InvalidMessageContents":       herr.InvalidArgument,
	"InvalidBatchEntryId":          herr.InvalidArgument,
	"BatchEntryIdsNotDistinct":     herr.InvalidArgument,
	"BatchRequestTooLong":          herr.InvalidArgument,
	"EmptyBatchRequest":            herr.InvalidArgument,
	"TooManyEntriesInBatchRequest": herr.InvalidArgument,
	"InvalidIdFormat":              herr.InvalidArgument,
	"ReceiptHandleIsInvalid":       herr.InvalidArgument,
	"MessageNotInflight":           herr.InvalidArgument,
	"InvalidAddress":               herr.InvalidArgument,
	"UnsupportedOperation":         herr.InvalidArgument,

	// Quotas: the account's topics, subscriptions or filter policies, or
	// SQS's in-flight limit (120,000 received, unsettled messages a queue).
	"FilterPolicyLimitExceeded": herr.ResourceExhausted,
	"SubscriptionLimitExceeded": herr.ResourceExhausted,
	"TopicLimitExceeded":        herr.ResourceExhausted,
	"OverLimit":                 herr.ResourceExhausted,

	// Herald's own AWS credentials or IAM policy are wrong. That is a
	// deployment fault, not the caller's: Internal (HTTP 500) rather than
	// Unauthenticated or PermissionDenied, which would tell an authorized
	// caller that they are not.
	"AuthorizationError":          herr.Internal,
	"AccessDenied":                herr.Internal,
	"AccessDeniedException":       herr.Internal,
	"InvalidClientTokenId":        herr.Internal,
	"UnrecognizedClientException": herr.Internal,
	"SignatureDoesNotMatch":       herr.Internal,
	"IncompleteSignature":         herr.Internal,
	"ExpiredToken":                herr.Internal,
	"InvalidSecurity":             herr.Internal,
	"KMSAccessDenied":             herr.Internal,
	"KmsAccessDenied":             herr.Internal,
}

var codeText = map[herr.Code]string{
	herr.NotFound:          "does not exist",
	herr.AlreadyExists:     "already exists",
	herr.Unavailable:       "Amazon SNS/SQS is unavailable; retry with backoff",
	herr.InvalidArgument:   "refused by Amazon SNS/SQS as invalid",
	herr.ResourceExhausted: "an Amazon SNS/SQS quota is exhausted",
	herr.Internal:          "Amazon SNS/SQS refused Herald's credentials or permissions",
	herr.Canceled:          "canceled",
	herr.DeadlineExceeded:  "timed out",
	herr.Unknown:           "failed",
}

// codeOf classifies an AWS SDK error.
func codeOf(err error) herr.Code {
	switch {
	case errors.Is(err, context.Canceled):
		return herr.Canceled
	case errors.Is(err, context.DeadlineExceeded):
		return herr.DeadlineExceeded
	}
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		// No answer from the service: connection refused or reset, DNS,
		// the SDK's retry quota, credentials that could not be loaded.
		return herr.Unavailable
	}
	if c, ok := errorCodes[ae.ErrorCode()]; ok {
		return c
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		if s := re.HTTPStatusCode(); s >= 500 || s == http.StatusTooManyRequests {
			return herr.Unavailable
		}
	}
	if ae.ErrorFault() == smithy.FaultServer {
		return herr.Unavailable
	}
	return herr.Unknown
}

// mapErr wraps an AWS SDK error with its herr code and a caller-safe
// message about what ("subscription \"x\"", "publish"); the AWS error,
// which may name ARNs and accounts, is kept as the cause for logs only.
func mapErr(err error, what string) error {
	if err == nil {
		return nil
	}
	var he *herr.Error
	if errors.As(err, &he) {
		return err // already ours
	}
	c := codeOf(err)
	return herr.Wrap(c, err, fmt.Sprintf("%s: %s", what, codeText[c]))
}

// apiCode returns an AWS error's code, or "" for errors without one.
func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}
