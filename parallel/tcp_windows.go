package parallel

// prepare: Windows runs the blocking engine (tcp_block.go).
func (t *tcpRing) prepare() error {
	t.blocking = true
	return nil
}

// runPoll is never called on Windows (prepare sets blocking).
func (t *tcpRing) runPoll(o *op, pl *plan) error { return t.runBlocking(o, pl) }
