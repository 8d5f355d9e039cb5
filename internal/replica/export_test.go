package replica

// SetStateSyncHook installs fn as the state files' fsync observer (nil
// removes it) and returns a function restoring the previous one.
func SetStateSyncHook(fn func(path string, size int64)) (restore func()) {
	var p *func(string, int64)
	if fn != nil {
		p = &fn
	}
	prev := stateSyncHook.Swap(p)
	return func() { stateSyncHook.Store(prev) }
}
