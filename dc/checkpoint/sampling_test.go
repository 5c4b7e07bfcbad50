package checkpoint_test

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/internal/dctest"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// withSampling returns a checkpoint's metadata with its dcdit.config's
// "sampling" set to the raw JSON text raw ("" removes the key).
func withSampling(t *testing.T, md map[string]string, raw string) map[string]string {
	t.Helper()
	var cfg map[string]json.RawMessage
	if err := json.Unmarshal([]byte(md[checkpoint.ConfigKey]), &cfg); err != nil {
		t.Fatal(err)
	}
	delete(cfg, "sampling")
	if raw != "" {
		cfg["sampling"] = json.RawMessage(raw)
	}
	// Marshal would re-check the raw text; what a file holds need not be
	// valid JSON.
	var b strings.Builder
	b.WriteString("{")
	first := true
	for k, v := range cfg {
		if !first {
			b.WriteString(",")
		}
		first = false
		b.WriteString(`"` + k + `":` + string(v))
	}
	b.WriteString("}")
	out := map[string]string{}
	for k, v := range md {
		out[k] = v
	}
	out[checkpoint.ConfigKey] = b.String()
	return out
}

// metadataOf reads a file's __metadata__.
func metadataOf(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := safetensors.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return f.Metadata()
}

// A sampling record is saved and loaded as given, "shift" stored for flow
// matching only.
func TestSamplingRoundTrip(t *testing.T) {
	c := dctest.Cases(t)[0]
	m, rhos := dctest.Model(t, c)
	cases := []struct {
		name      string
		rec       checkpoint.Sampling
		withShift bool
	}{
		{"ddpm", checkpoint.Sampling{Process: checkpoint.ProcessDDPM, DenseBelow: 600, CFG: 4, Steps: 25}, false},
		{"ddpm never dense, unguided", checkpoint.Sampling{Process: checkpoint.ProcessDDPM, CFG: 1, Steps: 250}, false},
		{"flow matching", checkpoint.Sampling{Process: checkpoint.ProcessFlowMatching, DenseBelow: 300, CFG: 2.5, Steps: 8, Shift: 3}, true},
		{"ddpm with coarse steps", checkpoint.Sampling{Process: checkpoint.ProcessDDPM, DenseBelow: 520, CoarseFrom: 830, CoarseRho: 0.95, CFG: 4, Steps: 25}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "m.safetensors")
			rec := tc.rec
			if err := checkpoint.Save(path, m, checkpoint.Info{TrainedRhos: rhos, Sampling: &rec}); err != nil {
				t.Fatal(err)
			}
			rec.Steps = -1 // Save keeps its own copy
			_, meta, err := checkpoint.Load(path)
			if err != nil {
				t.Fatal(err)
			}
			if meta.Sampling == nil || *meta.Sampling != tc.rec {
				t.Errorf("loaded sampling %+v, want %+v", meta.Sampling, tc.rec)
			}
			var stored struct {
				Sampling map[string]any `json:"sampling"`
			}
			if err := json.Unmarshal([]byte(metadataOf(t, path)[checkpoint.ConfigKey]), &stored); err != nil {
				t.Fatal(err)
			}
			if _, ok := stored.Sampling["shift"]; ok != tc.withShift {
				t.Errorf("stored %v: shift present %v, want %v", stored.Sampling, ok, tc.withShift)
			}
			if _, ok := stored.Sampling["coarse_from"]; ok != (tc.rec.CoarseFrom > 0) {
				t.Errorf("stored %v: coarse_from present %v, want %v", stored.Sampling, ok, tc.rec.CoarseFrom > 0)
			}
		})
	}
}

// A file without the record — written before it existed, or with it
// null — loads, with no record: the commands then use their defaults.
func TestSamplingAbsent(t *testing.T) {
	path := dctest.Checkpoint(t)
	md := metadataOf(t, path)
	if strings.Contains(md[checkpoint.ConfigKey], `"sampling"`) {
		t.Fatalf("a checkpoint saved without a record stores one: %s", md[checkpoint.ConfigKey])
	}
	_, meta, err := checkpoint.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	if meta.Sampling != nil {
		t.Errorf("sampling %+v, want none", meta.Sampling)
	}
	meta, err = checkpoint.ParseMeta(withSampling(t, md, "null"))
	if err != nil || meta.Sampling != nil {
		t.Errorf(`"sampling": null: sampling %+v, error %v; want none and no error`, meta, err)
	}
}

// Every bad record is refused in one line naming "sampling" and what is
// wrong with it (JSON without NaN, a NaN is a syntax error, found before
// any field is read).
func TestSamplingRejected(t *testing.T) {
	md := metadataOf(t, dctest.Checkpoint(t))
	cases := []struct {
		name, raw string
		want      string
	}{
		{"NaN", `{"process":"ddpm","dense_below":NaN,"cfg":4,"sampling_steps":25}`, "invalid character 'N'"},
		{"overflow", `{"process":"ddpm","dense_below":600,"cfg":1e999,"sampling_steps":25}`, "cfg"},
		{"negative steps", `{"process":"ddpm","dense_below":600,"cfg":4,"sampling_steps":-25}`, "sampling_steps -25"},
		{"no steps", `{"process":"ddpm","dense_below":600,"cfg":4,"sampling_steps":0}`, "sampling_steps 0"},
		{"too many steps", `{"process":"ddpm","dense_below":600,"cfg":4,"sampling_steps":100000000}`, "sampling_steps 100000000"},
		{"fractional steps", `{"process":"ddpm","dense_below":600,"cfg":4,"sampling_steps":2.5}`, "sampling_steps"},
		{"negative dense_below", `{"process":"ddpm","dense_below":-1,"cfg":4,"sampling_steps":25}`, "dense_below -1"},
		{"huge dense_below", `{"process":"ddpm","dense_below":1e30,"cfg":4,"sampling_steps":25}`, "dense_below 1e+30"},
		{"negative cfg", `{"process":"ddpm","dense_below":600,"cfg":-4,"sampling_steps":25}`, "cfg -4"},
		{"huge cfg", `{"process":"ddpm","dense_below":600,"cfg":1e300,"sampling_steps":25}`, "cfg 1e+300"},
		{"unknown key", `{"process":"ddpm","dense_below":600,"cfg":4,"sampling_steps":25,"guidance":4}`, `unknown field "guidance"`},
		{"missing key", `{"process":"ddpm","dense_below":600,"sampling_steps":25}`, "cfg missing"},
		{"unknown process", `{"process":"ddim","dense_below":600,"cfg":4,"sampling_steps":25}`, `process "ddim"`},
		{"no process", `{"dense_below":600,"cfg":4,"sampling_steps":25}`, "process missing"},
		{"shift with ddpm", `{"process":"ddpm","dense_below":600,"cfg":4,"sampling_steps":25,"shift":3}`, "shift 3 with process"},
		{"flow without shift", `{"process":"flow_matching","dense_below":600,"cfg":4,"sampling_steps":25}`, "shift missing"},
		{"flow with shift 0", `{"process":"flow_matching","dense_below":600,"cfg":4,"sampling_steps":25,"shift":0}`, "shift 0"},
		{"coarse_from without coarse_rho", `{"process":"ddpm","dense_below":600,"cfg":4,"sampling_steps":25,"coarse_from":800}`, "coarse_rho go together"},
		{"coarse_from 0", `{"process":"ddpm","dense_below":600,"cfg":4,"sampling_steps":25,"coarse_from":0,"coarse_rho":0.9}`, "coarse_from 0"},
		{"coarse_rho 1", `{"process":"ddpm","dense_below":600,"cfg":4,"sampling_steps":25,"coarse_from":800,"coarse_rho":1}`, "coarse_rho 1"},
		{"not an object", `"fast"`, "sampling"},
		{"empty object", `{}`, "missing"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := checkpoint.ParseMeta(withSampling(t, md, c.raw))
			if err == nil {
				t.Fatalf("no error, want one mentioning %q", c.want)
			}
			syntax := strings.HasPrefix(c.want, "invalid character")
			if msg := err.Error(); !(syntax || strings.Contains(msg, "sampling")) || !strings.Contains(msg, c.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q: want one line naming sampling and %q", msg, c.want)
			}
		})
	}
}

// Save refuses a record it could not read back.
func TestSamplingSaveRejects(t *testing.T) {
	m, _ := dctest.Model(t, dctest.Cases(t)[0])
	for _, rec := range []checkpoint.Sampling{
		{Process: checkpoint.ProcessDDPM, CFG: 4},
		{Process: checkpoint.ProcessDDPM, CFG: 4, Steps: 25, Shift: 3},
		{Process: "ddim", CFG: 4, Steps: 25},
	} {
		path := filepath.Join(t.TempDir(), "m.safetensors")
		if err := checkpoint.Save(path, m, checkpoint.Info{Sampling: &rec}); err == nil || !strings.Contains(err.Error(), "sampling") {
			t.Errorf("record %+v: error %v, want one naming sampling", rec, err)
		}
	}
}
