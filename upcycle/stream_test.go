package upcycle

import (
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/dc/checkpoint"
	"github.com/dcdit/dcdit/internal/testckpt"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/params"
	"github.com/dcdit/dcdit/zimage"
)

// The streamed graft is the graft: checkpoint.Load reads the folder it
// writes into exactly the model GraftTeacher builds from the same base in
// memory — backbone, scaffold and config — in the base's float type, in
// shards no larger than the base's; with the token embedder too.
func TestStreamGraftZImage(t *testing.T) {
	for _, dt := range []dtype.DType{dtype.F32, dtype.BF16} {
		t.Run(dt.String(), func(t *testing.T) {
			zc := testckpt.SmallZImageConfig()
			base := filepath.Join(t.TempDir(), "transformer")
			if err := testckpt.WriteZImageFolder(base, zc, dt, 20_000, 4); err != nil {
				t.Fatal(err)
			}
			s := DefaultScaffold()
			s.NormGroups, s.RouterGroups, s.WidthFactor = 8, 4, 2
			s.EncoderInit, s.NoEncoderNorm = "patch", true
			if dt == dtype.BF16 {
				// Cells of the base's patch, and the token embedder that
				// starts as its patch embedding.
				s.PatchSize, s.TokenEmbedder = zc.PatchSize, true
			}
			out := filepath.Join(t.TempDir(), "dc")
			var last, total int64
			rep, err := StreamGraft(base, s, out, StreamOptions{Rows: 8, Cols: 8, Seed: 3,
				Progress: func(done, all int64) { last, total = done, all }})
			if err != nil {
				t.Fatal(err)
			}
			if rep.DType != dt || last != total || total != rep.BackboneBytes || len(rep.Shards) < 3 {
				t.Fatalf("report %+v, progress %d of %d: want the base's %s, every byte counted, several shards", rep, last, total, dt)
			}
			got, meta, err := checkpoint.Load(out)
			if err != nil {
				t.Fatal(err)
			}
			if len(meta.Warnings) > 0 {
				t.Fatalf("load warned: %v", meta.Warnings)
			}

			zm, err := zimage.Load(base, zimage.LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			m, err := zimage.New(zm)
			if err != nil {
				t.Fatal(err)
			}
			want, err := GraftTeacher(zimage.Teacher{Model: m}, s, 8, 8, 3)
			if err != nil {
				t.Fatal(err)
			}
			if *got.Config != *want.Config {
				t.Fatalf("config %+v, want %+v", *got.Config, *want.Config)
			}
			// The scaffold is stored in the base's type.
			compare(t, "scaffold", values(t, got.Params.List(), dtype.F32), values(t, want.Params.List(), dt))
			compare(t, "backbone", values(t, got.Backbone.Parameters().List(), dtype.F32), values(t, want.Backbone.Parameters().List(), dtype.F32))
			if _, err := StreamGraft(base, s, out, StreamOptions{Rows: 8, Cols: 8}); err == nil || !strings.Contains(err.Error(), "already exists") {
				t.Fatalf("second write to %s: err = %v, want a refusal", out, err)
			}
		})
	}
}

// values maps each parameter's name to its values as stored in dt.
func values(t *testing.T, ps []*params.Param, dt dtype.DType) map[string][]float32 {
	t.Helper()
	out := make(map[string][]float32, len(ps))
	for _, p := range ps {
		raw := make([]byte, len(p.Values())*dt.Size())
		if err := dtype.EncodeFloat32(raw, p.Values(), dt); err != nil {
			t.Fatal(err)
		}
		v := make([]float32, len(p.Values()))
		if err := dtype.DecodeFloat32(v, raw, dt); err != nil {
			t.Fatal(err)
		}
		out[p.Name] = v
	}
	return out
}

// compare wants the same names with bit-identical values.
func compare(t *testing.T, what string, got, want map[string][]float32) {
	t.Helper()
	names := slices.Sorted(maps.Keys(want))
	if g := slices.Sorted(maps.Keys(got)); !slices.Equal(g, names) {
		t.Fatalf("%s tensors %v, want %v", what, g, names)
	}
	for _, name := range names {
		if !slices.Equal(got[name], want[name]) {
			t.Fatalf("%s tensor %s differs from the in-memory graft's", what, name)
		}
	}
}
