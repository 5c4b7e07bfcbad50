package progress

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// clock is a fake time source advanced by hand.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

func TestTerminalBar(t *testing.T) {
	var buf bytes.Buffer
	clk := &clock{t: time.Unix(0, 0)}
	b := newBar(&buf, "sampling", 4, true, clk.now)
	if got := buf.String(); got != "\rsampling [                        ] 0/4 steps, 0.0s elapsed, ETA --" {
		t.Fatalf("initial draw %q", got)
	}
	buf.Reset()
	clk.advance(2 * time.Second)
	b.Set(1)
	if got := buf.String(); got != "\rsampling [======                  ] 1/4 steps, 2.0s elapsed, ETA 6.0s" {
		t.Errorf("after 1 step %q", got)
	}
	// Redraws are throttled to one per 100 ms, except the last.
	buf.Reset()
	clk.advance(10 * time.Millisecond)
	b.Set(2)
	if buf.Len() != 0 {
		t.Errorf("redrew after 10 ms: %q", buf.String())
	}
	clk.advance(10 * time.Millisecond)
	b.Set(4)
	b.Finish()
	// The shorter final line blanks the leftovers of the longer one.
	want := "\rsampling [========================] 4/4 steps, 2.0s elapsed"
	if got := buf.String(); !strings.HasPrefix(got, want+"         ") || !strings.HasSuffix(got, "\n") {
		t.Errorf("final draw %q", got)
	}
}

func TestPlainLines(t *testing.T) {
	var buf bytes.Buffer
	clk := &clock{t: time.Unix(0, 0)}
	b := newBar(&buf, "sampling", 100, false, clk.now)
	for i := 1; i <= 100; i++ {
		clk.advance(time.Second)
		b.Set(i)
	}
	b.Finish()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	// One line every 10 s of a 100 s run, the last from Finish.
	if len(lines) != 10 {
		t.Fatalf("%d lines, want 10:\n%s", len(lines), buf.String())
	}
	if lines[0] != "sampling: 10/100 steps, 10.0s elapsed, ETA 1m30s" || lines[9] != "sampling: 100/100 steps, 1m40s elapsed" {
		t.Errorf("lines %q … %q", lines[0], lines[9])
	}
	if strings.Contains(buf.String(), "\r") {
		t.Error("plain output contains a carriage return")
	}

	// A quick run prints nothing at all.
	buf.Reset()
	b = newBar(&buf, "sampling", 5, false, clk.now)
	for i := 1; i <= 5; i++ {
		b.Set(i)
	}
	b.Finish()
	if buf.Len() != 0 {
		t.Errorf("quick run printed %q", buf.String())
	}
}

func TestNilBar(t *testing.T) {
	var b *Bar
	b.Set(3)
	b.Finish()
}

func TestDuration(t *testing.T) {
	cases := map[time.Duration]string{
		0:                       "0.0s",
		4200 * time.Millisecond: "4.2s",
		59 * time.Second:        "59.0s",
		187 * time.Second:       "3m07s",
		time.Hour + 2*time.Minute + 3*time.Second: "1h02m03s",
	}
	for d, want := range cases {
		if got := Duration(d); got != want {
			t.Errorf("Duration(%v) = %q, want %q", d, got, want)
		}
	}
}

func TestIsTerminal(t *testing.T) {
	if IsTerminal(&bytes.Buffer{}) {
		t.Error("a buffer is a terminal")
	}
	f, err := os.CreateTemp(t.TempDir(), "x")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if IsTerminal(f) {
		t.Error("a regular file is a terminal")
	}
}

// A note follows the counts in both modes; a nil bar ignores it.
func TestNote(t *testing.T) {
	for _, tty := range []bool{true, false} {
		var buf bytes.Buffer
		clk := &clock{t: time.Unix(0, 0)}
		b := newBar(&buf, "sampling", 2, tty, clk.now)
		b.Note("kept 45.2/256")
		clk.advance(11 * time.Second)
		b.Set(1)
		if !strings.Contains(buf.String(), "ETA 11.0s, kept 45.2/256") {
			t.Errorf("tty %v: %q lacks the note after the counts", tty, buf.String())
		}
	}
	var nilBar *Bar
	nilBar.Note("x")
}
