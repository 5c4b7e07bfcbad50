package vae

import (
	"math"
	"strings"
	"testing"

	"github.com/dcdit/dcdit/internal/fixtures"
)

func TestParseConfig(t *testing.T) {
	const blocks = `"block_out_channels": [32, 64], "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D"], "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D"]`
	for _, tt := range []struct {
		name, json string
		want       *Config // nil: an error saying err
		err        string
	}{
		{name: "defaults", json: `{}`, want: &Config{InChannels: 3, OutChannels: 3, BlockOutChannels: []int{64}, LayersPerBlock: 1, LatentChannels: 4,
			NormNumGroups: 32, MidBlockAddAttention: true, UseQuantConv: true, UsePostQuantConv: true, ScalingFactor: SDScalingFactor}},
		{name: "flux", json: `{"_class_name": "AutoencoderKL", "act_fn": "silu", ` + blocks + `, "latent_channels": 16, "layers_per_block": 2,
			"norm_num_groups": 32, "scaling_factor": 0.3611, "shift_factor": 0.1159, "use_quant_conv": false, "use_post_quant_conv": false,
			"latents_mean": null, "latents_std": null, "force_upcast": true, "sample_size": 1024}`,
			want: &Config{InChannels: 3, OutChannels: 3, BlockOutChannels: []int{32, 64}, LayersPerBlock: 2, LatentChannels: 16,
				NormNumGroups: 32, MidBlockAddAttention: true, ScalingFactor: 0.3611, ShiftFactor: 0.1159}},
		{name: "null shift", json: `{"shift_factor": null, "mid_block_add_attention": false}`, want: &Config{InChannels: 3, OutChannels: 3,
			BlockOutChannels: []int{64}, LayersPerBlock: 1, LatentChannels: 4, NormNumGroups: 32, UseQuantConv: true, UsePostQuantConv: true,
			ScalingFactor: SDScalingFactor}},
		{name: "act_fn", json: `{"act_fn": "gelu"}`, err: `act_fn "gelu"`},
		{name: "class", json: `{"_class_name": "AutoencoderTiny"}`, err: `_class_name "AutoencoderTiny"`},
		{name: "down type", json: `{"down_block_types": ["DownBlock2D"]}`, err: `down_block_types[0] is "DownBlock2D"`},
		{name: "block count", json: `{"block_out_channels": [32, 64], "down_block_types": ["DownEncoderBlock2D"]}`, err: "down_block_types has 1 entries, block_out_channels 2"},
		{name: "default types", json: `{"block_out_channels": [32, 64]}`, err: "down_block_types has 1 entries"},
		{name: "latents_mean", json: `{"latents_mean": [0.1, 0.2, 0.3, 0.4]}`, err: "latents_mean"},
		{name: "groups", json: `{"norm_num_groups": 48}`, err: "block_out_channels[0] = 64 does not split into norm_num_groups 48"},
		{name: "layers", json: `{"layers_per_block": 0}`, err: "layers_per_block 0"},
		{name: "scaling", json: `{"scaling_factor": 0}`, err: "scaling_factor 0"},
		{name: "type", json: `{"latent_channels": 4.5}`, err: "latent_channels"},
		{name: "syntax", json: `{`, err: "JSON"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c, err := ParseConfig([]byte(tt.json))
			if tt.want == nil {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("error %v, want one saying %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !equalConfig(c, tt.want) {
				t.Errorf("got %+v, want %+v", c, tt.want)
			}
			// JSON writes what ParseConfig reads back.
			text, err := c.JSON()
			if err != nil {
				t.Fatal(err)
			}
			back, err := ParseConfig(text)
			if err != nil {
				t.Fatalf("%v in\n%s", err, text)
			}
			if !equalConfig(back, c) {
				t.Errorf("round trip: %+v, want %+v", back, c)
			}
		})
	}
}

// Unscale inverts Scale up to float32 rounding, with the shift applied
// before the scaling.
func TestScale(t *testing.T) {
	for _, c := range []Config{{ScalingFactor: SDScalingFactor}, {ScalingFactor: FluxScalingFactor, ShiftFactor: FluxShiftFactor}} {
		z := []float32{-3, -0.5, 0, 0.1159, 1, 7}
		s := append([]float32(nil), z...)
		c.Scale(s)
		for i, v := range z {
			want := (float64(v) - c.ShiftFactor) * c.ScalingFactor
			if !fixtures.Within(math.Abs(float64(s[i])-want), 1e-6) {
				t.Errorf("%+v: Scale(%g) = %g, want %g", c, v, s[i], want)
			}
		}
		c.Unscale(s)
		if e := fixtures.RelErr(s, z); !fixtures.Within(e, 1e-6) {
			t.Errorf("%+v: Unscale(Scale(z)) = %v, want %v", c, s, z)
		}
	}
}

// ParseConfig never panics on config.json text; what it accepts is valid,
// has its tensor list, and survives JSON.
func FuzzParseConfig(f *testing.F) {
	f.Add([]byte(`{"block_out_channels": [128, 256, 512, 512], "down_block_types": ["DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D", "DownEncoderBlock2D"], "up_block_types": ["UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D", "UpDecoderBlock2D"], "latent_channels": 16, "shift_factor": 0.1159}`))
	f.Add([]byte(`{"act_fn": "silu", "norm_num_groups": 8, "block_out_channels": [16], "latents_mean": null}`))
	f.Add([]byte(`{"layers_per_block": -1}`))
	f.Fuzz(func(t *testing.T, text []byte) {
		c, err := ParseConfig(text)
		if err != nil {
			return
		}
		if _, err := ExpectedTensors(c); err != nil {
			t.Fatalf("accepted %s, but: %v", text, err)
		}
		out, err := c.JSON()
		if err != nil {
			t.Fatal(err)
		}
		back, err := ParseConfig(out)
		if err != nil || !equalConfig(back, c) {
			t.Fatalf("round trip of %s: %+v, %v", out, back, err)
		}
	})
}
