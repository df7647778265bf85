// gowork: a Go program that does ordinary work on goroutines, for
// bench/virtualize: 8 goroutines each build a map of 50,000 string keys,
// sort its keys and count them; prints the counts. Its clock reads are the
// runtime's own (scheduler, garbage collector, timers: about 1,500 a run),
// which under diehard go through the clock blob grafted into it
// (supervisor/virt/graft.h). The output is the same in every replica.
package main

import (
	"fmt"
	"sort"
	"strings"
	"sync"
)

func main() {
	var wg sync.WaitGroup
	counts := make([]int, 8)
	for w := range counts {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			m := map[string]int{}
			for i := 0; i < 50000; i++ {
				m[strings.Repeat("x", i%17)+fmt.Sprint(i%1000)]++
			}
			keys := make([]string, 0, len(m))
			for k := range m {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			counts[w] = len(keys)
		}(w)
	}
	wg.Wait()
	fmt.Println(counts)
}
