package distill

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Describer is implemented by objectives whose own settings change the
// training trajectory (the loss, the ρ set, the ratio loss's weight, the
// diffusion schedule, …). The settings join the run's fingerprint.
type Describer interface {
	// Settings returns the objective's settings: key → value as written
	// in messages.
	Settings() map[string]string
}

// settings is the run's fingerprint: every setting that changes the
// stage's trajectory, key → value. run.json records it; a resume with any
// value changed is refused, naming each one.
func (t *Trainer) settings() map[string]string {
	c := t.Config
	s := map[string]string{
		"trainer.stage":         c.Stage,
		"trainer.steps":         strconv.Itoa(c.Steps),
		"trainer.batch_size":    strconv.Itoa(c.BatchSize),
		"trainer.lr":            num(c.LR),
		"trainer.warmup":        strconv.Itoa(c.Warmup),
		"trainer.schedule":      c.Schedule,
		"trainer.min_lr":        num(c.MinLR),
		"trainer.betas":         num(c.Beta1) + ", " + num(c.Beta2),
		"trainer.eps":           num(c.Eps),
		"trainer.weight_decay":  num(c.WeightDecay),
		"trainer.clip":          num(c.ClipNorm),
		"trainer.ema_decay":     num(c.EMADecay),
		"trainer.seed":          strconv.FormatUint(c.Seed, 10),
		"trainer.label_dropout": num(c.LabelDropout),
		"trainer.null_class":    strconv.Itoa(c.NullClass),
		"data":                  t.Data.identity(),
		"data.samples":          strconv.Itoa(t.Data.Len()),
		"data.shape":            fmt.Sprintf("[%d %d %d]", t.Data.C, t.Data.H, t.Data.W),
	}
	// The parameter layout, what is frozen and the learning-rate groups,
	// each summed up as a count and a digest: the lists are too long to
	// show, and a changed digest is enough to refuse.
	layout, frozen, groups := sha256.New(), sha256.New(), make([]struct {
		n int
		h []byte
	}, len(c.Groups))
	nFrozen, vFrozen := 0, 0
	for _, p := range t.Params.List() {
		sh := p.Dense.Shape()
		fmt.Fprintf(layout, "%s%v;", p.Name, sh)
		if c.Frozen != nil && c.Frozen(p.Name) {
			fmt.Fprintf(frozen, "%s;", p.Name)
			nFrozen++
			vFrozen += p.Dense.Size()
			continue
		}
		for i, g := range c.Groups {
			if g.Match(p.Name) {
				groups[i].n++
				groups[i].h = fmt.Appendf(groups[i].h, "%s;", p.Name)
				break
			}
		}
	}
	s["params.layout"] = fmt.Sprintf("%d tensors, %d values, sha256 %s", len(t.Params.List()), t.Params.Len(), short(layout.Sum(nil)))
	s["params.frozen"] = fmt.Sprintf("%d tensors, %d values, sha256 %s", nFrozen, vFrozen, short(frozen.Sum(nil)))
	for i, g := range c.Groups {
		h := sha256.Sum256(groups[i].h)
		s["params.lr_group."+g.Name] = fmt.Sprintf("×%s over %d tensors, sha256 %s", num(g.Scale), groups[i].n, short(h[:]))
	}
	if d, ok := t.Objective.(Describer); ok {
		for k, v := range d.Settings() {
			s["objective."+k] = v
		}
	}
	maps.Copy(s, t.Identity)
	return s
}

// fingerprintHash digests settings in a fixed order.
func fingerprintHash(settings map[string]string) string {
	h := sha256.New()
	for _, k := range slices.Sorted(maps.Keys(settings)) {
		fmt.Fprintf(h, "%q=%q\n", k, settings[k])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// settingsDiff lists each setting that differs between a folder's run and
// this one as "KEY: was OLD, now NEW", in key order, at most limit of
// them.
func settingsDiff(old, cur map[string]string, limit int) string {
	keys := map[string]bool{}
	for k := range old {
		keys[k] = true
	}
	for k := range cur {
		keys[k] = true
	}
	var out []string
	for _, k := range slices.Sorted(maps.Keys(keys)) {
		o, inOld := old[k]
		n, inCur := cur[k]
		if inOld && inCur && o == n {
			continue
		}
		if !inOld {
			o = "(not set)"
		}
		if !inCur {
			n = "(not set)"
		}
		out = append(out, fmt.Sprintf("%s: was %s, now %s", k, show(o), show(n)))
	}
	if len(out) > limit {
		out = append(out[:limit], fmt.Sprintf("… and %d more", len(out)-limit))
	}
	return strings.Join(out, "; ")
}

// show quotes a value that would not read well bare.
func show(v string) string {
	if v == "" || strings.ContainsAny(v, ";") {
		return strconv.Quote(v)
	}
	return v
}

// num formats a float the shortest way that reads back exactly.
func num(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }

func short(h []byte) string { return hex.EncodeToString(h)[:16] }

// identity is Dataset.Identity, or a digest of the latents, labels and
// captions (computed once).
func (d *Dataset) identity() string {
	if d.Identity != "" {
		return d.Identity
	}
	if d.digest == "" {
		h := sha256.New()
		buf := make([]byte, 0, 1<<16)
		for i, v := range d.Latents {
			buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(v))
			if len(buf) == cap(buf) || i == len(d.Latents)-1 {
				h.Write(buf)
				buf = buf[:0]
			}
		}
		for _, y := range d.Labels {
			buf = binary.LittleEndian.AppendUint64(buf, uint64(int64(y)))
		}
		h.Write(buf)
		d.digest = "latents and labels sha256 " + short(h.Sum(nil))
		if d.Captions != nil {
			// A caption is its length, then its words.
			buf = buf[:0]
			for _, c := range d.Captions {
				buf = binary.LittleEndian.AppendUint64(buf, uint64(len(c)))
				for _, w := range c {
					buf = binary.LittleEndian.AppendUint64(buf, uint64(int64(w)))
				}
			}
			if d.EmptyCaption != nil {
				buf = binary.LittleEndian.AppendUint64(buf, uint64(len(d.EmptyCaption)))
				for _, w := range d.EmptyCaption {
					buf = binary.LittleEndian.AppendUint64(buf, uint64(int64(w)))
				}
			}
			h.Write(buf)
			d.digest = "latents, labels and captions sha256 " + short(h.Sum(nil))
		}
	}
	return d.digest
}

// isRunFile says whether a run folder's file is one the trainer writes
// (the manifest, the metrics log, a checkpoint): the temporary files of
// those are what a resume cleans up.
func isRunFile(name string) bool {
	return name == manifestName || name == metricsName ||
		(strings.HasPrefix(name, "state-") && strings.HasSuffix(name, ".safetensors"))
}
