package remoting

// Stopper is what Shutdown needs of a protoactor *remote.Remote.
type Stopper interface {
	Shutdown(graceful bool)
}

// Shutdown stops r gracefully; if the graceful stop panics (the race
// described in the package doc), it stops r hard instead, so closing a
// connection never crashes the process. It reports whether the graceful
// stop completed.
func Shutdown(r Stopper) (graceful bool) {
	defer func() {
		if v := recover(); v != nil {
			graceful = false
			r.Shutdown(false)
		}
	}()
	r.Shutdown(true)
	return true
}
