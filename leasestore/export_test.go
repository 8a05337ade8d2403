package leasestore

// SetTestHookPullRead makes f run in every Pull right after it reads the
// consumer record, until the returned function is called.
func SetTestHookPullRead(f func(consumer string)) (restore func()) {
	testHookPullRead.Store(&f)
	return func() { testHookPullRead.Store(nil) }
}
