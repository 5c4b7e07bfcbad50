// Package dcfile opens every DC model file a user can point at as one
// kind of thing: dcdit's DC checkpoints (package dc/checkpoint: the
// config in the metadata) and the official DC-DiT's files (package
// dc/hnet/official: a PyTorch state dict, with its YAML config beside it
// or pickled in a training checkpoint, or neither). Open loads the model
// with the metadata its file records, or implies, and warnings for what
// the file leaves to assumption; ReadHeader describes it from the
// headers alone, to price or report a file too large to load.
package dcfile

import (
	"errors"
	"fmt"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/dc/hnet/official"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
)

// Format is the kind of DC model file.
type Format string

// The formats.
const (
	// DC is dcdit's DC checkpoint, which records everything.
	DC Format = "dcdit"
	// Official is the official DC-DiT's state dict, which records its
	// sizes only unless its config comes with it.
	Official Format = "official"
)

// ErrNotDC is the error of a file that holds no DC model.
var ErrNotDC = errors.New("not a DC model")

// FormatOf is the format of the DC model detection's report describes, or
// "" for a file that holds none.
func FormatOf(rep *arch.Report) Format {
	switch {
	case rep.Layout == arch.DCLayout:
		return DC
	case rep.Architecture == arch.DCDiT:
		return Official
	}
	return ""
}

// Options complete what a file does not store (see official.Options; a
// DC checkpoint stores everything and ignores them).
type Options = official.Options

// Header is what a DC model file says of its model.
type Header struct {
	Format Format
	// Meta describes the model; Meta.Warnings are what reading the file
	// found suspicious or had to assume.
	Meta *checkpoint.Meta
	// Expected lists every tensor the file must hold, with its shape
	// (ReadHeader only).
	Expected map[string][]int
	// Report is the model's description for reports (ReadHeader only): a
	// DC checkpoint's Meta, or what an official file states.
	Report any
	// Preset names the preset the head count was taken from
	// (Options.GuessHeads), or "".
	Preset string
	// HeadsUnknown says that the file does not store the head count and
	// none was given: Meta prices nothing.
	HeadsUnknown bool
}

// ReadHeader describes the DC model of the opened checkpoint ck from its
// headers; no tensor data is read. A DC checkpoint's stated block counts
// are checked against its tensors first, so that Expected is as long as
// the file, not as its metadata claims.
func ReadHeader(ck *loaders.Checkpoint, opts Options) (*Header, error) {
	rep := arch.Detect(ck.ArchInput(0))
	switch FormatOf(rep) {
	case DC:
		m, err := checkpoint.ParseMeta(ck.Metadata)
		if err != nil {
			return nil, fmt.Errorf("not a valid DC checkpoint: %w", err)
		}
		if err := m.CheckTensors(ck.Shapes()); err != nil {
			return nil, fmt.Errorf("not a valid DC checkpoint: __metadata__ %q: %w", checkpoint.ConfigKey, err)
		}
		return &Header{Format: DC, Meta: m, Expected: m.Shapes(), Report: m}, nil
	case Official:
		h, err := official.ReadHeader(ck, opts)
		if err != nil {
			return nil, err
		}
		return &Header{Format: Official, Meta: h.Meta, Expected: h.Expected, Report: h.Report, Preset: h.Preset, HeadsUnknown: h.HeadsUnknown}, nil
	}
	return nil, notDC(ck.Path, rep)
}

// Open loads the DC model at path: a DC checkpoint in full (checksums
// verified), or an official file with what opts completes.
func Open(path string, opts Options) (*dc.Model, *Header, error) {
	ck, err := loaders.Open(path)
	if err != nil {
		return nil, nil, err
	}
	rep := arch.Detect(ck.ArchInput(0))
	ck.Close()
	var m *dc.Model
	var meta *checkpoint.Meta
	f := FormatOf(rep)
	switch f {
	case DC:
		m, meta, err = checkpoint.Load(path)
	case Official:
		m, meta, err = official.Open(path, opts)
	default:
		return nil, nil, notDC(path, rep)
	}
	if err != nil {
		return nil, nil, err
	}
	return m, &Header{Format: f, Meta: meta}, nil
}

// notDC says what the file at path holds instead of a DC model.
func notDC(path string, rep *arch.Report) error {
	return fmt.Errorf("%s holds a %s checkpoint (%s naming): %w", path, rep.Architecture, rep.Layout, ErrNotDC)
}
