// Package progress reports how far a counted task has come on a command's
// stderr: a bar redrawn in place when the stream is a terminal, otherwise an
// occasional plain line, so logs stay readable.
package progress

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"
)

// Bar tracks done/total steps of one task. A nil *Bar reports nothing, so
// callers can disable progress by not creating one.
type Bar struct {
	w     io.Writer
	label string
	total int
	// tty selects the in-place bar; otherwise plain lines every interval.
	tty      bool
	interval time.Duration
	now      func() time.Time

	start, last time.Time
	done        int
	note        string // shown after the counts
	bytes       bool   // done and total are bytes, shown as sizes and a rate
	drawn       int    // length of the bar line on screen, to blank leftovers
	wrote       bool   // a plain line was written
}

// Redraw and plain-line rates.
const (
	ttyInterval   = 100 * time.Millisecond
	plainInterval = 10 * time.Second
	barWidth      = 24
)

// New starts a bar for total steps on w. If w is a terminal the bar is drawn
// at once and redrawn in place; otherwise a plain line is written at most
// every 10 seconds, so quick runs print nothing.
func New(w io.Writer, label string, total int) *Bar {
	return newBar(w, label, total, IsTerminal(w), time.Now)
}

func newBar(w io.Writer, label string, total int, tty bool, now func() time.Time) *Bar {
	b := &Bar{w: w, label: label, total: total, tty: tty, interval: plainInterval, now: now}
	if tty {
		b.interval = ttyInterval
	}
	b.start = now()
	b.last = b.start
	if tty {
		b.draw()
	}
	return b
}

// NewBytes starts a bar for a task measured in bytes (a copy, a
// conversion): the counts read "1.2 GB / 24.6 GB" with the rate so far.
func NewBytes(w io.Writer, label string, total int64) *Bar {
	b := newBar(w, label, int(total), IsTerminal(w), time.Now)
	b.bytes = true
	return b
}

// Set records that done of the total steps are complete.
func (b *Bar) Set(done int) {
	if b == nil {
		return
	}
	b.done = min(max(done, 0), b.total)
	t := b.now()
	if t.Sub(b.last) < b.interval && b.done < b.total {
		return
	}
	if !b.tty && b.done == b.total {
		return // Finish writes the closing line
	}
	b.last = t
	if b.tty {
		b.draw()
	} else {
		fmt.Fprintln(b.w, b.status())
		b.wrote = true
	}
}

// Note sets a short text shown after the counts from the next redraw or
// plain line on, such as what the last step did.
func (b *Bar) Note(s string) {
	if b == nil {
		return
	}
	b.note = s
}

// Finish ends the report: the terminal bar is completed and its line ended;
// in plain mode a closing line is written only if progress lines were.
func (b *Bar) Finish() {
	if b == nil {
		return
	}
	if b.tty {
		b.draw()
		fmt.Fprintln(b.w)
		return
	}
	if b.wrote {
		fmt.Fprintln(b.w, b.status())
	}
}

// draw rewrites the terminal line: label, bar, counts, elapsed, ETA.
func (b *Bar) draw() {
	fill := 0
	if b.total > 0 {
		fill = barWidth * b.done / b.total
	}
	line := fmt.Sprintf("%s [%s%s] %s", b.label, strings.Repeat("=", fill), strings.Repeat(" ", barWidth-fill), b.counts())
	pad := max(b.drawn-len(line), 0)
	fmt.Fprintf(b.w, "\r%s%s", line, strings.Repeat(" ", pad))
	b.drawn = len(line)
}

// status is the plain-line form.
func (b *Bar) status() string { return b.label + ": " + b.counts() }

func (b *Bar) counts() string {
	elapsed := b.now().Sub(b.start)
	s := fmt.Sprintf("%d/%d steps, %s elapsed", b.done, b.total, Duration(elapsed))
	if b.bytes {
		s = fmt.Sprintf("%s / %s, %s elapsed", Bytes(int64(b.done)), Bytes(int64(b.total)), Duration(elapsed))
		if sec := elapsed.Seconds(); sec > 0 {
			s += fmt.Sprintf(", %s/s", Bytes(int64(float64(b.done)/sec)))
		}
	}
	switch {
	case b.done == b.total:
	case b.done == 0:
		s += ", ETA --"
	default:
		eta := time.Duration(float64(elapsed) * float64(b.total-b.done) / float64(b.done))
		s += ", ETA " + Duration(eta)
	}
	if b.note != "" {
		s += ", " + b.note
	}
	return s
}

// Duration formats d for people: "4.2s" under a minute, else "3m07s" or
// "1h02m03s".
func Duration(d time.Duration) string {
	if d < time.Minute {
		return fmt.Sprintf("%.1fs", d.Seconds())
	}
	s := int64(d.Round(time.Second) / time.Second)
	if s < 3600 {
		return fmt.Sprintf("%dm%02ds", s/60, s%60)
	}
	return fmt.Sprintf("%dh%02dm%02ds", s/3600, s/60%60, s%60)
}

// Bytes formats n in decimal units ("512 B", "3.4 MB", "24.6 GB"), the
// units checkpoint sizes are quoted in.
func Bytes(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d B", n)
	case n < 1e6:
		return fmt.Sprintf("%.1f kB", float64(n)/1e3)
	case n < 1e9:
		return fmt.Sprintf("%.1f MB", float64(n)/1e6)
	}
	return fmt.Sprintf("%.2f GB", float64(n)/1e9)
}

// IsTerminal reports whether w is an *os.File open on a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && isTerminal(f)
}
