package storetest

import (
	"testing"
)

var pullCases = []conformanceCase{}

var _ = testing.T{}
