// goclock: a Go program reading its clocks the way Go programs do, for
// tests/fastclock.bats and bench/virtualize. Go binaries are static: their
// runtime reads the clocks through the vDSO itself, so under diehard they
// take the clock blob diehard grafts into them (supervisor/virt/graft.h).
//
//	goclock G N
//
// G goroutines each make N time.Now() and time.Since() reads, handing a
// token round a ring of channels every 100 reads (the scheduler's own
// clock reads come with it). Prints "ok G x N" and "now SECONDS" (the wall
// clock at the end): the same in every replica, the second a real time.
// Durations are not printed: the runtime's own threads read the monotonic
// clock a different number of times in each replica (docs/NONDETERMINISM.md).
// Exits 1 when the monotonic clock steps back in a goroutine.
package main

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"time"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: goclock GOROUTINES READS")
		os.Exit(2)
	}
	g, err1 := strconv.Atoi(os.Args[1])
	n, err2 := strconv.Atoi(os.Args[2])
	if err1 != nil || err2 != nil || g < 1 || n < 0 {
		fmt.Fprintln(os.Stderr, "goclock: GOROUTINES and READS are counts")
		os.Exit(2)
	}
	ring := make([]chan int, g)
	for i := range ring {
		ring[i] = make(chan int, 1)
	}
	ring[0] <- 0
	var wg sync.WaitGroup
	back := make(chan int, g)
	for i := 0; i < g; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			start := time.Now()
			var last time.Duration
			for r := 0; r < n; r++ {
				d := time.Since(start)
				if d < last {
					back <- i
					return
				}
				last = d
				if r%100 == 99 {
					t := <-ring[i]
					ring[(i+1)%g] <- t + 1
				}
			}
		}(i)
	}
	wg.Wait()
	close(back)
	for i := range back {
		fmt.Fprintf(os.Stderr, "goclock: the monotonic clock went back in goroutine %d\n", i)
		os.Exit(1)
	}
	fmt.Printf("ok %d x %d\n", g, n)
	fmt.Printf("now %d\n", time.Now().Unix())
}
