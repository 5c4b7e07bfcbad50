package loaders_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/loaders/arch"
)

// The reference DiT weights, in both namings, are recognised with the
// configuration the fixture was generated from.
func TestFixtureDiTDetection(t *testing.T) {
	fixtures.Run(t, "dit-tiny", func(t *testing.T, c fixtures.Case) {
		want := func(r *arch.Report, layout arch.Layout) *arch.DiTConfig {
			t.Helper()
			if r.Architecture != arch.DiT || r.Layout != layout {
				t.Fatalf("detected %s/%s, want dit/%s", r.Architecture, r.Layout, layout)
			}
			if len(r.Missing)+len(r.Unexpected)+len(r.Mismatched) != 0 {
				t.Errorf("missing %v, unexpected %v, mismatched %v", r.Missing, r.Unexpected, r.Mismatched)
			}
			cfg := r.Config.(*arch.DiTConfig)
			got := map[string]any{
				"depth": cfg.Depth, "hidden_size": cfg.HiddenSize, "patch_size": cfg.PatchSize,
				"in_channels": cfg.InChannels, "input_size": cfg.InputSize, "num_classes": cfg.NumClasses,
				"out_channels": cfg.OutChannels(),
			}
			for k, v := range got {
				if w, ok := c.Int(k); !ok || w != v {
					t.Errorf("%s = %v, fixture config says %v", k, v, c.Config[k])
				}
			}
			if cfg.LearnSigma != c.Config["learn_sigma"] {
				t.Errorf("learn_sigma = %v, fixture says %v", cfg.LearnSigma, c.Config["learn_sigma"])
			}
			if ratio, _ := c.Config["mlp_ratio"].(float64); cfg.MLPRatio != ratio {
				t.Errorf("mlp_ratio = %v, fixture says %v", cfg.MLPRatio, ratio)
			}
			return cfg
		}

		ck, err := loaders.Open(filepath.Join(c.Dir, "weights.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		defer ck.Close()
		want(detect(t, ck, 0), arch.Original)

		// The diffusers weights, in a model folder with the fixture's
		// diffusers config, also give the head count.
		dir := filepath.Join(t.TempDir(), "transformer")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		cfgText, _ := json.Marshal(c.Config["diffusers_config"])
		if err := os.WriteFile(filepath.Join(dir, "config.json"), cfgText, 0o644); err != nil {
			t.Fatal(err)
		}
		abs, _ := filepath.Abs(filepath.Join(c.Dir, "weights-diffusers.safetensors"))
		if err := os.Symlink(abs, filepath.Join(dir, "diffusion_pytorch_model.safetensors")); err != nil {
			t.Fatal(err)
		}
		dk, err := loaders.Open(filepath.Dir(dir))
		if err != nil {
			t.Fatal(err)
		}
		defer dk.Close()
		cfg := want(detect(t, dk, 0), arch.Diffusers)
		if heads, _ := c.Int("num_heads"); cfg.NumHeads != heads {
			t.Errorf("num_heads = %d, fixture says %d", cfg.NumHeads, heads)
		}
	})
}

// The reference Z-Image weights are recognised with their configuration,
// from shapes alone.
func TestFixtureZImageDetection(t *testing.T) {
	fixtures.Run(t, "zimage-tiny", func(t *testing.T, c fixtures.Case) {
		ck, err := loaders.Open(filepath.Join(c.Dir, "weights.safetensors"))
		if err != nil {
			t.Fatal(err)
		}
		defer ck.Close()
		r := detect(t, ck, 0)
		if r.Architecture != arch.ZImage || r.Layout != arch.Diffusers {
			t.Fatalf("detected %s/%s, want zimage/diffusers", r.Architecture, r.Layout)
		}
		if len(r.Missing)+len(r.Unexpected)+len(r.Mismatched) != 0 {
			t.Errorf("missing %v, unexpected %v, mismatched %v", r.Missing, r.Unexpected, r.Mismatched)
		}
		cfg := r.Config.(*arch.ZImageConfig)
		patch := c.Config["all_patch_size"].([]any)[0].(float64)
		fpatch := c.Config["all_f_patch_size"].([]any)[0].(float64)
		got := map[string]int{
			"dim": cfg.Dim, "n_layers": cfg.NLayers, "n_refiner_layers": cfg.NRefinerLayers, "n_heads": cfg.NHeads,
			"n_kv_heads": cfg.NKVHeads, "in_channels": cfg.InChannels, "cap_feat_dim": cfg.CapFeatDim,
			"ffn_hidden": cfg.FFNHidden, "adaln_dim": cfg.AdaLNDim, "head_dim": cfg.HeadDim(),
			"t_embedder_mid_size": cfg.TMidDim, "FREQUENCY_EMBEDDING_SIZE": cfg.FrequencySize,
		}
		for k, v := range got {
			if w, ok := c.Int(k); !ok || w != v {
				t.Errorf("%s = %d, fixture config says %v", k, v, c.Config[k])
			}
		}
		if cfg.PatchSize != int(patch) || cfg.FPatchSize != int(fpatch) {
			t.Errorf("patch %d/%d, fixture says %v/%v", cfg.PatchSize, cfg.FPatchSize, patch, fpatch)
		}
		if cfg.QKNorm != c.Config["qk_norm"] {
			t.Errorf("qk_norm = %v, fixture says %v", cfg.QKNorm, c.Config["qk_norm"])
		}
	})
}
