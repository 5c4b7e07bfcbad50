package distill

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"

	"github.com/dcdit/dcdit/loaders/atomicfile"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
	"github.com/dcdit/dcdit/optim"
)

// A run folder holds one stage's state:
//
//	run.json                      the manifest, written last: stage, fingerprint, step, checkpoints
//	state-00000100.safetensors    parameters, EMA weights and AdamW moments after step 100
//	metrics.jsonl                 one JSON object per logged step
//
// A checkpoint counts once the manifest names it, so a run killed while
// saving resumes from the previous checkpoint.
type runFolder struct {
	dir, stage string
	settings   map[string]string // the fingerprint, see Trainer.settings
	legacy     string            // the fingerprint before run.json held settings
}

// manifest is run.json.
type manifest struct {
	Stage string `json:"stage"`
	// Fingerprint is a SHA-256 of Settings (of the legacy fingerprint in
	// folders written before Settings was recorded).
	Fingerprint string `json:"fingerprint"`
	// Settings are the settings that decide the run's trajectory, so that
	// a refused resume can say which ones changed.
	Settings    map[string]string `json:"settings,omitempty"`
	Step        int               `json:"step"`
	Checkpoints []string          `json:"checkpoints"` // oldest first; the last is current
}

const (
	manifestName = "run.json"
	metricsName  = "metrics.jsonl"
)

func (r *runFolder) path(name string) string { return filepath.Join(r.dir, name) }

func (r *runFolder) hash() string { return fingerprintHash(r.settings) }

func (r *runFolder) legacyHash() string {
	h := sha256.Sum256([]byte(r.legacy))
	return hex.EncodeToString(h[:])
}

// check refuses a folder that holds another run, naming what differs.
func (r *runFolder) check(m *manifest) error {
	where := r.path(manifestName)
	switch {
	case m.Stage != r.stage:
		return fmt.Errorf("distill: %s holds another run: stage %q, not %q; resume needs the same recipe, or choose a new output folder", where, m.Stage, r.stage)
	case m.Settings == nil && m.Fingerprint == r.legacyHash():
		return nil // an older folder, as far as it recorded; Settings are added at the next save
	case m.Settings == nil:
		return fmt.Errorf("distill: %s holds another run (other settings or model; written by an older dcdit that did not record which); resume needs the same recipe, or choose a new output folder", where)
	case m.Fingerprint != r.hash():
		if d := settingsDiff(m.Settings, r.settings, 20); d != "" {
			return fmt.Errorf("distill: %s holds another run: %s; resume needs the same settings, or choose a new output folder", where, d)
		}
		return fmt.Errorf("distill: %s holds another run (its fingerprint %s does not match its settings); choose a new output folder", where, m.Fingerprint)
	}
	return nil
}

func (r *runFolder) readManifest() (*manifest, error) {
	data, err := os.ReadFile(r.path(manifestName))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("distill: %w", err)
	}
	var m manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("distill: %s: %w", r.path(manifestName), err)
	}
	if len(m.Checkpoints) == 0 {
		return nil, fmt.Errorf("distill: %s names no checkpoint", r.path(manifestName))
	}
	// Checkpoint names are joined to the folder and stale ones deleted:
	// only the names this package writes may pass, never a path.
	for _, name := range m.Checkpoints {
		var step int
		if _, err := fmt.Sscanf(name, "state-%08d.safetensors", &step); err != nil || name != fmt.Sprintf("state-%08d.safetensors", step) {
			return nil, fmt.Errorf("distill: %s: checkpoint %.80q: want a name state-NNNNNNNN.safetensors in the run folder", r.path(manifestName), name)
		}
	}
	return &m, nil
}

// lastGood says where the last complete checkpoint is, for error messages.
func (r *runFolder) lastGood() string {
	m, err := r.readManifest()
	if err != nil || m == nil {
		return "no checkpoint was saved yet"
	}
	return fmt.Sprintf("the last good checkpoint is %s (step %d)", r.path(m.Checkpoints[len(m.Checkpoints)-1]), m.Step)
}

// resume restores the state the manifest names and returns its step, or 0
// for a fresh folder.
func (r *runFolder) resume(data, ema []float32, opt *optim.AdamW) (int, error) {
	m, err := r.readManifest()
	if err != nil || m == nil {
		return 0, err
	}
	if err := r.check(m); err != nil {
		return 0, err
	}
	path := r.path(m.Checkpoints[len(m.Checkpoints)-1])
	f, err := safetensors.Open(path)
	if err != nil {
		return 0, fmt.Errorf("distill: resume: %w", err)
	}
	defer f.Close()
	read := func(name string, n int) ([]float32, error) {
		t, ok := f.Tensor(name)
		if !ok {
			return nil, fmt.Errorf("distill: resume: %s lacks tensor %q", path, name)
		}
		v, err := t.Float32()
		if err != nil {
			return nil, fmt.Errorf("distill: resume: %s: %w", path, err)
		}
		if len(v) != n {
			return nil, fmt.Errorf("distill: resume: %s: tensor %q has %d values, want %d", path, name, len(v), n)
		}
		return v, nil
	}
	v, err := read("params", len(data))
	if err != nil {
		return 0, err
	}
	copy(data, v)
	if ema != nil {
		if v, err = read("ema", len(ema)); err != nil {
			return 0, err
		}
		copy(ema, v)
	}
	k := opt.Mask().NumTrainable()
	mom, err := read("adam.m", k)
	if err != nil {
		return 0, err
	}
	vel, err := read("adam.v", k)
	if err != nil {
		return 0, err
	}
	adamStep, err := strconv.ParseInt(f.Metadata()["adam_step"], 10, 64)
	if err != nil {
		return 0, fmt.Errorf("distill: resume: %s: metadata adam_step: %w", path, err)
	}
	if err := opt.SetState(optim.State{Step: adamStep, M: append([]float32(nil), mom...), V: append([]float32(nil), vel...)}); err != nil {
		return 0, fmt.Errorf("distill: resume: %s: %w", path, err)
	}
	return m.Step, nil
}

// save writes the state after step, then the manifest, then removes the
// checkpoints beyond keep.
func (r *runFolder) save(step, keep int, data, ema []float32, opt *optim.AdamW) error {
	st := opt.State()
	ts := []safetensors.WriteTensor{vector("params", data), vector("adam.m", st.M), vector("adam.v", st.V)}
	if ema != nil {
		ts = append(ts, vector("ema", ema))
	}
	name := fmt.Sprintf("state-%08d.safetensors", step)
	meta := map[string]string{"stage": r.stage, "step": strconv.Itoa(step), "adam_step": strconv.FormatInt(st.Step, 10), "fingerprint": r.hash()}
	if err := safetensors.Write(r.path(name), ts, meta); err != nil {
		return fmt.Errorf("distill: checkpoint at step %d: %w (%s)", step, err, r.lastGood())
	}
	m, err := r.readManifest()
	if err != nil {
		return err
	}
	if m == nil {
		m = &manifest{Stage: r.stage}
	}
	m.Fingerprint, m.Settings = r.hash(), r.settings
	if n := len(m.Checkpoints); n == 0 || m.Checkpoints[n-1] != name {
		m.Checkpoints = append(m.Checkpoints, name)
	}
	m.Step = step
	var stale []string
	if len(m.Checkpoints) > keep {
		stale = m.Checkpoints[:len(m.Checkpoints)-keep]
		m.Checkpoints = append([]string(nil), m.Checkpoints[len(m.Checkpoints)-keep:]...)
	}
	text, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(r.path(manifestName), func(w io.Writer) error { _, err := w.Write(append(text, '\n')); return err }); err != nil {
		return fmt.Errorf("distill: manifest at step %d: %w", step, err)
	}
	for _, s := range stale {
		if err := os.Remove(r.path(s)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("distill: removing an old checkpoint: %w", err)
		}
	}
	return nil
}

// vector is a flat F32 tensor for a checkpoint.
func vector(name string, v []float32) safetensors.WriteTensor {
	return safetensors.WriteTensor{Name: name, DType: dtype.F32, Shape: []int64{int64(len(v))}, Data: dtype.F32Bytes(v)}
}

// metricsLog appends to metrics.jsonl.
type metricsLog struct {
	f *os.File
	w *bufio.Writer
}

// openLog keeps the log's lines up to step start (a resumed run drops
// what the interrupted one logged after its last checkpoint) and opens it
// for appending.
func (r *runFolder) openLog(start int) (*metricsLog, error) {
	path := r.path(metricsName)
	old, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("distill: %w", err)
	}
	var kept bytes.Buffer
	for line := range bytes.Lines(old) {
		var rec struct {
			Step int `json:"step"`
		}
		if json.Unmarshal(line, &rec) == nil && rec.Step <= start && bytes.HasSuffix(line, []byte("\n")) {
			kept.Write(line)
		}
	}
	if err := atomicfile.Write(path, func(w io.Writer) error { _, err := w.Write(kept.Bytes()); return err }); err != nil {
		return nil, fmt.Errorf("distill: metrics log: %w", err)
	}
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("distill: %w", err)
	}
	return &metricsLog{f: f, w: bufio.NewWriter(f)}, nil
}

func (l *metricsLog) write(p Progress) error {
	rec := struct {
		Stage string `json:"stage"`
		Step  int    `json:"step"`
		Metrics
		LR          float64 `json:"lr"`
		GradNorm    float64 `json:"grad_norm"`
		StepsPerSec float64 `json:"steps_per_s"`
	}{p.Stage, p.Step, p.Metrics, p.LR, p.GradNorm, p.StepsPerSec}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	if _, err = l.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("distill: metrics log: %w", err)
	}
	// Flushed line by line so that the log can be followed while training.
	return l.w.Flush()
}

func (l *metricsLog) sync() error {
	if err := l.w.Flush(); err != nil {
		return fmt.Errorf("distill: metrics log: %w", err)
	}
	return l.f.Sync()
}

func (l *metricsLog) Close() error {
	err := l.w.Flush()
	if cerr := l.f.Close(); err == nil {
		err = cerr
	}
	return err
}
