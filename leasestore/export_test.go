package leasestore

// Hook points for SetTestHook.
const (
	HookPullRead      = hookPullRead
	HookPullReclaimed = hookPullReclaimed
)

// SetTestHook makes f run at every hook point of every Pull until the
// returned function is called.
func SetTestHook(f func(point, consumer string)) (restore func()) {
	testHook.Store(&f)
	return func() { testHook.Store(nil) }
}
