package dit

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders/dtype"
	"github.com/dcdit/dcdit/loaders/safetensors"
)

// Both namings of the reference weights load to the same parameters.
func TestLoadBothNamings(t *testing.T) {
	fixtures.Run(t, "dit-tiny", func(t *testing.T, c fixtures.Case) {
		heads, _ := c.Int("num_heads")
		orig, err := Load(filepath.Join(c.Dir, "weights.safetensors"), LoadOptions{NumHeads: heads})
		if err != nil {
			t.Fatal(err)
		}
		diff, err := Load(diffusersFolder(t, c), LoadOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(orig.Params) != len(diff.Params) {
			t.Fatalf("%d parameters from the original naming, %d from diffusers", len(orig.Params), len(diff.Params))
		}
		for name, p := range orig.Params {
			q, ok := diff.Params[name]
			if !ok || !reflect.DeepEqual(p.Shape, q.Shape) || !reflect.DeepEqual(p.Data, q.Data) {
				t.Errorf("%s differs between the namings", name)
			}
		}
		// The computed position table is the stored one.
		w := c.Open(t, "weights.safetensors")
		if e := fixtures.RelErr(orig.Params["pos_embed"].Data, w.F32("pos_embed")); !fixtures.Within(e, 1e-7) {
			t.Errorf("pos_embed err %.3g > 1e-7", e)
		}
	})
}

// A diffusers checkpoint missing a tensor, or whose per-block copy of the
// class embedder differs from block 0's, is refused with both named.
func TestLoadRejectsBrokenCheckpoints(t *testing.T) {
	fixtures.Run(t, "dit-tiny", func(t *testing.T, c fixtures.Case) {
		// The last block's copy of the class embedder is the one dropped,
		// then corrupted: the case's depth decides which block that is.
		depth, ok := c.Int("depth")
		if !ok || depth < 1 {
			t.Fatalf("%s: config.json has no positive integer depth", c.Name)
		}
		copyPrefix := fmt.Sprintf("transformer_blocks.%d.norm1.emb.class_embedder", depth-1)
		src, err := safetensors.Open(filepath.Join(c.Dir, "weights-diffusers.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		var tensors []safetensors.WriteTensor
		for _, info := range src.Tensors() {
			tt, _ := src.Tensor(info.Name)
			raw, _ := tt.Bytes()
			data := append([]byte(nil), raw...)
			switch {
			case info.Name == "proj_out_2.bias":
				continue // missing
			case strings.HasPrefix(info.Name, copyPrefix):
				data[0] ^= 0x40 // an untied embedder copy
			}
			tensors = append(tensors, safetensors.WriteTensor{Name: info.Name, DType: dtype.F32, Shape: info.Shape, Data: data})
		}
		dir := t.TempDir()
		missing := filepath.Join(dir, "missing.safetensors")
		var withBias []safetensors.WriteTensor
		for _, tt := range tensors {
			if !strings.HasPrefix(tt.Name, copyPrefix) {
				withBias = append(withBias, tt)
			}
		}
		if err := safetensors.Write(missing, withBias, nil); err != nil {
			t.Fatal(err)
		}
		_, err = Load(missing, LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), "missing proj_out_2.bias") || !strings.Contains(err.Error(), "class_embedder") {
			t.Errorf("err = %v, want missing proj_out_2.bias and the class embedder copy named", err)
		}
		if depth < 2 {
			return // a single copy cannot differ from another
		}
		// Restore the missing tensor; only the untied copy is wrong now.
		bias, _ := src.Tensor("proj_out_2.bias")
		raw, _ := bias.Bytes()
		tensors = append(tensors, safetensors.WriteTensor{Name: "proj_out_2.bias", DType: dtype.F32, Shape: bias.Shape, Data: append([]byte(nil), raw...)})
		untied := filepath.Join(dir, "untied.safetensors")
		if err := safetensors.Write(untied, tensors, nil); err != nil {
			t.Fatal(err)
		}
		_, err = Load(untied, LoadOptions{})
		if err == nil || !strings.Contains(err.Error(), "differs from block 0's copy") {
			t.Errorf("err = %v, want the untied embedder reported", err)
		}
	})
}

// diffusersFolder lays the fixture's diffusers weights out as a diffusers
// model folder with the fixture's diffusers config.
func diffusersFolder(t *testing.T, c fixtures.Case) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "transformer")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg, _ := json.Marshal(c.Config["diffusers_config"])
	if err := os.WriteFile(filepath.Join(dir, "config.json"), cfg, 0o644); err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.Abs(filepath.Join(c.Dir, "weights-diffusers.safetensors"))
	if err := os.Symlink(abs, filepath.Join(dir, "diffusion_pytorch_model.safetensors")); err != nil {
		t.Fatal(err)
	}
	return filepath.Dir(dir)
}
