package pgdocstore

import (
	"errors"
	"fmt"

	"gocloud.dev/gcerrors"
)

// codedError is an error of the driver's own, with its docstore code.
type codedError struct {
	code gcerrors.ErrorCode
	msg  string
	err  error // the cause, or nil
}

func (e *codedError) Error() string {
	if e.err == nil {
		return e.msg
	}
	return e.msg + ": " + e.err.Error()
}

func (e *codedError) Unwrap() error { return e.err }

// errorf returns a codedError; cause may be nil.
func errorf(code gcerrors.ErrorCode, cause error, format string, args ...any) error {
	return &codedError{code: code, msg: fmt.Sprintf(format, args...), err: cause}
}

// ownCode returns the code of a codedError in err's chain.
func ownCode(err error) (gcerrors.ErrorCode, bool) {
	var ce *codedError
	if errors.As(err, &ce) {
		return ce.code, true
	}
	return 0, false
}
