// Command demo produces examples/demo.pb.gz: a real Go CPU profile with
// pprof labels, made by runtime/pprof while the program hashes, sorts and
// encodes data on two labelled workers. Run: go run main.go ../demo.pb.gz
package main

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"runtime/pprof"
	"sort"
	"sync"
	"time"
)

type record struct {
	ID    int
	Name  string
	Score float64
}

func hashWork(n int) byte {
	var acc byte
	buf := make([]byte, 4096)
	for i := 0; i < n; i++ {
		buf[i%len(buf)] = byte(i)
		sum := sha256.Sum256(buf)
		acc ^= sum[0]
	}
	return acc
}

func sortWork(n int) int {
	rng := rand.New(rand.NewSource(int64(n)))
	total := 0
	for round := 0; round < 40; round++ {
		xs := make([]int, n)
		for i := range xs {
			xs[i] = rng.Int()
		}
		sort.Ints(xs)
		total += xs[len(xs)/2] & 1
	}
	return total
}

func encodeWork(n int) int {
	recs := make([]record, n)
	for i := range recs {
		recs[i] = record{ID: i, Name: fmt.Sprintf("item-%d", i), Score: float64(i) * 1.5}
	}
	size := 0
	for round := 0; round < 30; round++ {
		b, _ := json.Marshal(recs)
		var back []record
		_ = json.Unmarshal(b, &back)
		size += len(b)
	}
	return size
}

func worker(ctx context.Context, name string, deadline time.Time, wg *sync.WaitGroup) {
	defer wg.Done()
	pprof.Do(ctx, pprof.Labels("worker", name), func(ctx context.Context) {
		for time.Now().Before(deadline) {
			if name == "hasher" {
				hashWork(2000)
			} else {
				sortWork(20000)
				encodeWork(2000)
			}
		}
	})
}

func main() {
	out, err := os.Create(os.Args[1])
	if err != nil {
		panic(err)
	}
	defer out.Close()
	if err := pprof.StartCPUProfile(out); err != nil {
		panic(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	for _, name := range []string{"hasher", "sorter"} {
		wg.Add(1)
		go worker(context.Background(), name, deadline, &wg)
	}
	wg.Wait()
	pprof.StopCPUProfile()
}
