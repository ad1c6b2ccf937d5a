// mcload: a bounded memcached load generator for Weft's benchmarks (bench/memcached_vs_memcached.py).
//
// Each of -conns connections sends -pipeline requests at once (text or binary protocol), reads
// every response, checks it, and repeats until the connection's share of -requests is done or
// -timeout passes. It prints one line: "<ops per second> <ops> <seconds> <misses>". Any
// unexpected response stops the run with an error (exit status 1), so a broken server cannot
// look fast. Only loopback addresses are accepted.
//
//	go run ./bench/mcload -addr 127.0.0.1:11211 -op set -conns 50 -pipeline 16 -requests 1000000
package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

type config struct {
	addr     string
	op       string
	proto    string
	conns    int
	pipeline int
	requests int
	keyspace int
	size     int
	timeout  time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.addr, "addr", "127.0.0.1:11211", "server address (loopback only)")
	flag.StringVar(&c.op, "op", "get", "set or get")
	flag.StringVar(&c.proto, "proto", "text", "text or binary")
	flag.IntVar(&c.conns, "conns", 50, "connections")
	flag.IntVar(&c.pipeline, "pipeline", 1, "requests in flight per connection")
	flag.IntVar(&c.requests, "requests", 200000, "requests in all")
	flag.IntVar(&c.keyspace, "keyspace", 100000, "distinct keys (key:<n>)")
	flag.IntVar(&c.size, "size", 100, "value bytes")
	flag.DurationVar(&c.timeout, "timeout", 120*time.Second, "stop after this long")
	flag.Parse()
	if err := check(c); err != nil {
		fmt.Fprintln(os.Stderr, "mcload:", err)
		os.Exit(2)
	}
	ops, misses, elapsed, err := run(c)
	if err != nil {
		fmt.Fprintln(os.Stderr, "mcload:", err)
		os.Exit(1)
	}
	fmt.Printf("%.0f %d %.3f %d\n", float64(ops)/elapsed.Seconds(), ops, elapsed.Seconds(), misses)
}

func check(c config) error {
	host, _, err := net.SplitHostPort(c.addr)
	if err != nil {
		return err
	}
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("%s is not a loopback address", host)
	}
	if c.op != "set" && c.op != "get" {
		return fmt.Errorf("unknown op %q", c.op)
	}
	if c.proto != "text" && c.proto != "binary" {
		return fmt.Errorf("unknown protocol %q", c.proto)
	}
	if c.conns < 1 || c.pipeline < 1 || c.requests < c.conns || c.keyspace < 1 || c.size < 0 {
		return errors.New("conns, pipeline, keyspace must be positive and requests at least conns")
	}
	return nil
}

func run(c config) (int64, int64, time.Duration, error) {
	conns := make([]net.Conn, c.conns)
	for i := range conns {
		conn, err := net.DialTimeout("tcp", c.addr, 5*time.Second)
		if err != nil {
			return 0, 0, 0, err
		}
		defer conn.Close()
		conns[i] = conn
	}
	var ops, misses atomic.Int64
	var firstErr error
	var errOnce sync.Once
	deadline := time.Now().Add(c.timeout)
	start := time.Now()
	var wg sync.WaitGroup
	for i, conn := range conns {
		share := c.requests / c.conns
		if i < c.requests%c.conns {
			share++
		}
		wg.Add(1)
		go func(conn net.Conn, share int, seed int64) {
			defer wg.Done()
			_ = conn.SetDeadline(deadline.Add(5 * time.Second))
			w := worker{c: c, rng: rand.New(rand.NewSource(seed)), r: bufio.NewReaderSize(conn, 64<<10),
				value: bytes.Repeat([]byte{'x'}, c.size)}
			for done := 0; done < share && time.Now().Before(deadline); {
				batch := min(c.pipeline, share-done)
				missed, err := w.round(conn, batch)
				if err != nil {
					errOnce.Do(func() { firstErr = err })
					return
				}
				done += batch
				ops.Add(int64(batch))
				misses.Add(int64(missed))
			}
		}(conn, share, int64(i)+1)
	}
	wg.Wait()
	return ops.Load(), misses.Load(), time.Since(start), firstErr
}

type worker struct {
	c     config
	rng   *rand.Rand
	r     *bufio.Reader
	out   []byte
	value []byte
}

// round sends batch requests in one write and reads their responses; returns the GET misses.
func (w *worker) round(conn net.Conn, batch int) (int, error) {
	w.out = w.out[:0]
	for i := 0; i < batch; i++ {
		key := "key:" + strconv.Itoa(w.rng.Intn(w.c.keyspace))
		if w.c.proto == "text" {
			w.text(key)
		} else {
			w.binary(key, uint32(i))
		}
	}
	if _, err := conn.Write(w.out); err != nil {
		return 0, err
	}
	misses := 0
	for i := 0; i < batch; i++ {
		var hit bool
		var err error
		if w.c.proto == "text" {
			hit, err = w.readText()
		} else {
			hit, err = w.readBinary(uint32(i))
		}
		if err != nil {
			return 0, err
		}
		if !hit {
			misses++
		}
	}
	return misses, nil
}

func (w *worker) text(key string) {
	if w.c.op == "set" {
		w.out = fmt.Appendf(w.out, "set %s 0 0 %d\r\n", key, len(w.value))
		w.out = append(w.out, w.value...)
		w.out = append(w.out, "\r\n"...)
	} else {
		w.out = fmt.Appendf(w.out, "get %s\r\n", key)
	}
}

func (w *worker) readText() (bool, error) {
	line, err := w.r.ReadString('\n')
	if err != nil {
		return false, err
	}
	switch {
	case w.c.op == "set" && line == "STORED\r\n":
		return true, nil
	case w.c.op == "get" && line == "END\r\n":
		return false, nil
	case w.c.op == "get" && strings.HasPrefix(line, "VALUE "):
		fields := strings.Fields(line)
		if len(fields) < 4 {
			return false, fmt.Errorf("bad VALUE line %q", line)
		}
		n, err := strconv.Atoi(fields[3])
		if err != nil || n != len(w.value) {
			return false, fmt.Errorf("bad VALUE length in %q", line)
		}
		if _, err := w.r.Discard(n + 2); err != nil {
			return false, err
		}
		end, err := w.r.ReadString('\n')
		if err != nil || end != "END\r\n" {
			return false, fmt.Errorf("expected END, got %q (%v)", end, err)
		}
		return true, nil
	}
	return false, fmt.Errorf("unexpected response %q", line)
}

const (
	opGet = 0x00
	opSet = 0x01
)

func (w *worker) binary(key string, opaque uint32) {
	var header [24]byte
	header[0] = 0x80
	extras := 0
	body := len(key)
	if w.c.op == "set" {
		header[1] = opSet
		extras = 8
		body += extras + len(w.value)
	} else {
		header[1] = opGet
	}
	binary.BigEndian.PutUint16(header[2:], uint16(len(key)))
	header[4] = byte(extras)
	binary.BigEndian.PutUint32(header[8:], uint32(body))
	binary.BigEndian.PutUint32(header[12:], opaque)
	w.out = append(w.out, header[:]...)
	if extras > 0 {
		w.out = append(w.out, make([]byte, extras)...) // flags 0, expiration 0
	}
	w.out = append(w.out, key...)
	if w.c.op == "set" {
		w.out = append(w.out, w.value...)
	}
}

func (w *worker) readBinary(opaque uint32) (bool, error) {
	var header [24]byte
	if _, err := io.ReadFull(w.r, header[:]); err != nil {
		return false, err
	}
	if header[0] != 0x81 {
		return false, fmt.Errorf("bad response magic %#x", header[0])
	}
	status := binary.BigEndian.Uint16(header[6:])
	body := binary.BigEndian.Uint32(header[8:])
	if got := binary.BigEndian.Uint32(header[12:]); got != opaque {
		return false, fmt.Errorf("opaque %d, expected %d", got, opaque)
	}
	if _, err := w.r.Discard(int(body)); err != nil {
		return false, err
	}
	switch {
	case status == 0:
		if w.c.op == "get" && int(body)-int(header[4]) != len(w.value) {
			return false, fmt.Errorf("GET returned %d bytes", int(body)-int(header[4]))
		}
		return true, nil
	case status == 1 && w.c.op == "get":
		return false, nil
	}
	return false, fmt.Errorf("status %#x", status)
}
