// Command allocs_main writes a large real Go allocs profile for the
// benchmarks: runtime.MemProfileRate = 1 records every allocation, and each
// allocation is made at the end of a call path through four mutually
// recursive functions (4 call sites each), so the profile holds one sample
// per distinct stack with its `bytes` label, as Go writes them.
//
// Paths are shaped like a real program's: a pool of HOT "hot paths" fixes the
// upper part of the stack (shared prefixes), and the last levels vary
// (allocations diverge near the leaves). HOT=0 makes every level random (the
// worst case for any tool: stacks diverge at the root).
//
//	go run allocs_main.go OUT.pb.gz [ALLOCATIONS] [DEPTH] [HOT] [RANDOM_LEVELS]
package main

import (
	"math/rand"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
)

var sink [][]byte

//go:noinline
func leaf(size int) { sink = append(sink, make([]byte, size)) }

//go:noinline
func fa(depth int, path uint64, size int) {
	if depth == 0 {
		leaf(size)
		return
	}
	switch path & 3 {
	case 0:
		fa(depth-1, path>>2, size)
	case 1:
		fb(depth-1, path>>2, size)
	case 2:
		fc(depth-1, path>>2, size)
	default:
		fd(depth-1, path>>2, size)
	}
}

//go:noinline
func fb(depth int, path uint64, size int) {
	if depth == 0 {
		leaf(size * 2)
		return
	}
	switch path & 3 {
	case 0:
		fb(depth-1, path>>2, size)
	case 1:
		fc(depth-1, path>>2, size)
	case 2:
		fd(depth-1, path>>2, size)
	default:
		fa(depth-1, path>>2, size)
	}
}

//go:noinline
func fc(depth int, path uint64, size int) {
	if depth == 0 {
		leaf(size + 16)
		return
	}
	switch path & 3 {
	case 0:
		fc(depth-1, path>>2, size)
	case 1:
		fd(depth-1, path>>2, size)
	case 2:
		fa(depth-1, path>>2, size)
	default:
		fb(depth-1, path>>2, size)
	}
}

//go:noinline
func fd(depth int, path uint64, size int) {
	if depth == 0 {
		leaf(size + 48)
		return
	}
	switch path & 3 {
	case 0:
		fd(depth-1, path>>2, size)
	case 1:
		fa(depth-1, path>>2, size)
	case 2:
		fb(depth-1, path>>2, size)
	default:
		fc(depth-1, path>>2, size)
	}
}

func main() {
	runtime.MemProfileRate = 1
	n, depth, hot, randomLevels := 700000, 26, 3000, 7
	args := []*int{&n, &depth, &hot, &randomLevels}
	for i, a := range os.Args[2:] {
		if i < len(args) {
			*args[i], _ = strconv.Atoi(a)
		}
	}
	rng := rand.New(rand.NewSource(42))
	pool := make([]uint64, hot)
	for i := range pool {
		pool[i] = rng.Uint64()
	}
	shift := uint(2 * (depth - randomLevels))
	for i := 0; i < n; i++ {
		path := rng.Uint64()
		if hot > 0 {
			prefix := pool[rng.Intn(hot)] & (1<<shift - 1)
			path = prefix | (path << shift)
		}
		fa(depth, path, 8+rng.Intn(4096))
		if len(sink) > 4096 {
			sink = sink[:0]
		}
	}
	runtime.GC()
	out, err := os.Create(os.Args[1])
	if err != nil {
		panic(err)
	}
	defer out.Close()
	if err := pprof.Lookup("allocs").WriteTo(out, 0); err != nil {
		panic(err)
	}
}
