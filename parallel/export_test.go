package parallel

// Test hooks: damage a frame, or act after a frame is sent.

// SetCorrupt makes the n-th frame this rank sends from now on malformed:
// a payload bit flipped after the checksum (TCP), or a wrong length (shm).
func SetCorrupt(c *Comm, n int) {
	switch t := c.tr.(type) {
	case *tcpRing:
		t.corrupt = n
	case *shmRing:
		t.corrupt = n
	}
}

// SetOnSend installs a function called after every frame this rank sends.
func SetOnSend(c *Comm, f func(sent uint64)) { c.onSend = f }
