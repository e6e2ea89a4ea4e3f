package parallel

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"syscall"
	"time"
)

// CheckMaster checks a rendezvous address for a launcher that starts rank
// 0 on this machine: HOST:PORT with a port 1-65535, a host that resolves,
// and an address rank 0 can listen on here (bound, then released). The
// error names --master and says which of these failed.
func CheckMaster(addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return fmt.Errorf("--master %q: want HOST:PORT, such as 127.0.0.1:29500", addr)
	}
	if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("--master %s: port %q: want a number 1-65535", addr, port)
	}
	if net.ParseIP(host) == nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := net.DefaultResolver.LookupHost(ctx, host); err != nil {
			var de *net.DNSError
			if errors.As(err, &de) {
				err = errors.New(de.Err)
			}
			return fmt.Errorf("--master %s: host %q does not resolve (%v)", addr, host, err)
		}
	}
	ln, err := net.Listen("tcp", addr)
	switch {
	case errors.Is(err, syscall.EADDRNOTAVAIL):
		return fmt.Errorf("--master %s: %s is not an address of this machine, where rank 0 runs and listens", addr, host)
	case errors.Is(err, syscall.EADDRINUSE):
		return fmt.Errorf("--master %s: the port is in use on this machine, where rank 0 runs and listens", addr)
	case err != nil:
		return fmt.Errorf("--master %s: rank 0 cannot listen there: %v", addr, err)
	}
	ln.Close()
	return nil
}
