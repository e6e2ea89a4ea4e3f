package parallel

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"gptlab/internal/testutil"
)

// BenchmarkAllReduce times the all-reduce of two ranks in this process
// (two goroutines, each its own communicator). Rank 1 mirrors rank 0
// until rank 0 closes; its last all-reduce then fails, by design.
//
//	go test -run XXX -bench AllReduce ./parallel/
func BenchmarkAllReduce(b *testing.B) {
	testutil.SkipSpeedEmulated(b)
	for _, tr := range []string{"shm", "tcp"} {
		for _, bytes := range []int{4 << 10, 1 << 20, 16 << 20} {
			b.Run(fmt.Sprintf("%s/%dKiB", tr, bytes>>10), func(b *testing.B) {
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				master := l.Addr().String()
				l.Close()
				opt := Options{Transport: tr, Deadline: 500 * time.Millisecond}
				peer := make(chan *Comm)
				go func() {
					c, err := Join(context.Background(), Env{Rank: 1, WorldSize: 2, Master: master}, opt)
					if err != nil {
						peer <- nil
						return
					}
					peer <- c
					buf := make([]float32, bytes/4)
					for c.AllReduce(buf) == nil {
					}
					c.Close()
				}()
				c, err := Join(context.Background(), Env{Rank: 0, WorldSize: 2, Master: master}, opt)
				if err != nil || <-peer == nil {
					b.Fatalf("join: %v", err)
				}
				buf := make([]float32, bytes/4)
				b.SetBytes(int64(bytes))
				b.ReportAllocs()
				for b.Loop() {
					if err := c.AllReduce(buf); err != nil {
						b.Fatal(err)
					}
				}
				c.Close()
			})
		}
	}
}
