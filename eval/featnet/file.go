package featnet

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/dcdit/dcdit/datasets"
	"github.com/dcdit/dcdit/datasets/shapes"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// Metadata keys of a weights file.
const (
	// MetaFormat marks a featnet file (value FormatName), so that Load can
	// say "not a feature network" rather than list every missing tensor.
	MetaFormat = "dcdit.format"
	// MetaConfig holds the Config as JSON.
	MetaConfig = "dcdit.featnet.config"
	// MetaTraining holds the Info as JSON.
	MetaTraining = "dcdit.featnet.training"
	// MetaDataset is the shapes generator version the network was trained
	// on (the data sets' key, datasets.MetaDataset).
	MetaDataset = datasets.MetaDataset
)

// FormatName is MetaFormat's value.
const FormatName = "featnet"

// Save writes the weights (F32) and their metadata to path atomically. The
// network's Config, Info and data version always go into the metadata;
// extra adds more keys (it may not override those).
func (n *Net) Save(path string, extra map[string]string) error {
	if n == nil || n.p == nil {
		return errors.New("featnet: save: nil network")
	}
	cfg, err := json.Marshal(n.Config)
	if err != nil {
		return fmt.Errorf("featnet: save: %w", err)
	}
	info, err := json.Marshal(n.Info)
	if err != nil {
		return fmt.Errorf("featnet: save: %w", err)
	}
	dataset := n.Info.Dataset
	if dataset == "" {
		dataset = shapes.Version
	}
	meta := map[string]string{}
	for k, v := range extra {
		meta[k] = v
	}
	for k, v := range map[string]string{MetaFormat: FormatName, MetaConfig: string(cfg), MetaTraining: string(info), MetaDataset: dataset} {
		if old, ok := meta[k]; ok && old != v {
			return fmt.Errorf("featnet: save: extra metadata %q would override the network's own", k)
		}
		meta[k] = v
	}
	var ts []safetensors.WriteTensor
	for _, s := range n.Config.specs() {
		v := n.p.Get(s.name).Values()
		b := make([]byte, 4*len(v))
		if err := dtype.EncodeFloat32(b, v, dtype.F32); err != nil {
			return fmt.Errorf("featnet: save: %s: %w", s.name, err)
		}
		ts = append(ts, safetensors.WriteTensor{Name: s.name, DType: dtype.F32, Shape: s.file, Data: b})
	}
	if err := safetensors.Write(path, ts, meta); err != nil {
		return fmt.Errorf("featnet: save: %w", err)
	}
	return nil
}

// Load reads a network saved by Save. It refuses a file made for another
// shapes generator version (its features would describe other data), and
// names every missing, misshaped or unexpected tensor at once.
func Load(path string) (*Net, error) {
	f, err := safetensors.Open(path)
	if err != nil {
		return nil, fmt.Errorf("featnet: load: %w", err)
	}
	defer f.Close()
	meta := f.Metadata()
	if meta[MetaFormat] != FormatName {
		return nil, fmt.Errorf("featnet: load: %s: not a feature network (metadata %s = %q, want %q)", path, MetaFormat, meta[MetaFormat], FormatName)
	}
	if v := meta[MetaDataset]; v != shapes.Version {
		return nil, fmt.Errorf("featnet: load: %s: trained on data %q, but the shapes generator is %q now: retrain it (dcdit featnet train)", path, v, shapes.Version)
	}
	var cfg Config
	if err := strictJSON(meta[MetaConfig], &cfg); err != nil {
		return nil, fmt.Errorf("featnet: load: %s: metadata %s: %w", path, MetaConfig, err)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("featnet: load: %s: %w", path, err)
	}
	net, err := newNet(cfg)
	if err != nil {
		return nil, err
	}
	if s := meta[MetaTraining]; s != "" {
		if err := strictJSON(s, &net.Info); err != nil {
			return nil, fmt.Errorf("featnet: load: %s: metadata %s: %w", path, MetaTraining, err)
		}
	}
	var problems []string
	want := map[string]bool{}
	for _, s := range cfg.specs() {
		want[s.name] = true
		t, ok := f.Tensor(s.name)
		if !ok {
			problems = append(problems, fmt.Sprintf("tensor %q: missing (expected shape %v)", s.name, s.file))
			continue
		}
		if !slices.Equal(t.Shape, s.file) {
			problems = append(problems, fmt.Sprintf("tensor %q: expected shape %v, found %v", s.name, s.file, t.Shape))
			continue
		}
		v, err := t.Float32()
		if err != nil {
			problems = append(problems, fmt.Sprintf("tensor %q: %v", s.name, err))
			continue
		}
		for i, x := range v {
			if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
				problems = append(problems, fmt.Sprintf("tensor %q: value %d is %v", s.name, i, x))
				break
			}
		}
		copy(net.p.Get(s.name).Values(), v)
	}
	for _, t := range f.Tensors() {
		if !want[t.Name] {
			problems = append(problems, fmt.Sprintf("tensor %q: unexpected (shape %v)", t.Name, t.Shape))
		}
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("featnet: load: %s: %s", path, strings.Join(problems, "; "))
	}
	return net, nil
}

// strictJSON decodes s into v, refusing unknown fields: a config written
// by a different architecture must not load as this one with fields
// silently dropped.
func strictJSON(s string, v any) error {
	if s == "" {
		return errors.New("missing")
	}
	d := json.NewDecoder(strings.NewReader(s))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		return err
	}
	if d.More() {
		return errors.New("trailing data after the JSON value")
	}
	return nil
}
