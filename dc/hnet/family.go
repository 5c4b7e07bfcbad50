package hnet

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders"
)

func init() { family.Register(Family{}) }

var _ family.Costed = Family{}

// Family is DC-DiT's own main network as a model family (kind "hnet"),
// also the kind of DiT blocks grafted into it.
type Family struct{}

// Kind returns Kind.
func (Family) Kind() string { return Kind }

// Describe names the family for listings.
func (Family) Describe() string {
	return "DC-DiT's main network (official DC-DiT layout): DiT blocks and an RMSNorm; also a grafted DiT"
}

// DecodeSpec reads {"config": Config} strictly.
func (Family) DecodeSpec(data []byte) (family.Spec, error) {
	return family.DecodeInto(data, func(s Spec) bool { return s.Config != nil })
}

// Spec is the main network's description in a DC checkpoint: its config,
// patch_size always written. Its tensors are the official DC-DiT names
// (Shapes).
type Spec struct {
	Config *Config `json:"config"`
}

// MarshalJSON writes {"config": ...} with patch_size explicit.
func (s Spec) MarshalJSON() ([]byte, error) {
	if s.Config == nil {
		return nil, errors.New("hnet backbone without a config")
	}
	c := *s.Config
	if c.PatchSize == 0 {
		c.PatchSize = 1
	}
	return json.Marshal(struct {
		Config Config `json:"config"`
	}{c})
}

// Kind returns Kind.
func (Spec) Kind() string { return Kind }

// Settings returns the *Config.
func (s Spec) Settings() any { return s.Config }

// Width is D.
func (s Spec) Width() int { return s.Config.Width }

// CondWidth is D (t_embed + y_embed).
func (s Spec) CondWidth() int { return s.Config.Width }

// Validate checks the config and bounds every size it states.
func (s Spec) Validate() error {
	c := s.Config
	if c == nil {
		return errors.New("hnet backbone without a config")
	}
	if err := family.CheckBounds(
		family.Bound{Name: "backbone width", V: c.Width, Max: family.MaxWidth},
		family.Bound{Name: "backbone depth", V: c.Depth, Max: family.MaxBlocks},
		family.Bound{Name: "backbone heads", V: c.Heads, Max: family.MaxWidth},
		family.Bound{Name: "backbone mlp_hidden", V: c.MLPHidden, Max: family.MaxMLP},
		family.Bound{Name: "backbone frequency_size", V: c.FrequencySize, Max: family.MaxWidth},
		family.Bound{Name: "backbone num_classes", V: c.NumClasses, Max: family.MaxClasses},
		family.Bound{Name: "backbone patch_size", V: c.PatchSize, Max: family.MaxGridSide},
	); err != nil {
		return err
	}
	if err := family.CheckPositive(
		family.Bound{Name: "backbone config: width", V: c.Width}, family.Bound{Name: "backbone config: depth", V: c.Depth},
		family.Bound{Name: "backbone config: heads", V: c.Heads}, family.Bound{Name: "backbone config: mlp_hidden", V: c.MLPHidden},
		family.Bound{Name: "backbone config: frequency_size", V: c.FrequencySize},
		family.Bound{Name: "backbone config: num_classes", V: c.NumClasses},
	); err != nil {
		return err
	}
	if c.PatchSize < 0 {
		return fmt.Errorf("backbone config: patch_size = %d, want ≥ 1", c.PatchSize)
	}
	if c.Width%c.Heads != 0 || c.Width%4 != 0 {
		return fmt.Errorf("backbone config: width %d with %d heads: want heads dividing the width and a width divisible by 4", c.Width, c.Heads)
	}
	if c.WidthGates && c.MLPHidden%c.Heads != 0 {
		return fmt.Errorf("backbone config: width_gates with mlp_hidden %d and %d heads: want the heads dividing the MLP into as many channel groups", c.MLPHidden, c.Heads)
	}
	if c.FrequencySize%2 != 0 {
		return fmt.Errorf("backbone config: frequency_size = %d, want an even number", c.FrequencySize)
	}
	return nil
}

var _ family.Describer = Spec{}

// Describe names the main network's size in one line.
func (s Spec) Describe() string {
	heads := fmt.Sprintf("%d heads", s.Config.Heads)
	if s.Config.Heads == 1 {
		heads = "1 head"
	}
	return fmt.Sprintf("main network %d blocks × %d, %s", s.Config.Depth, s.Config.Width, heads)
}

var _ family.Reheader = Spec{}

// WithHeads returns a copy of the description with heads attention heads.
func (s Spec) WithHeads(heads int) family.Spec {
	c := *s.Config
	c.Heads = heads
	return Spec{Config: &c}
}

// Conditioning is class labels.
func (s Spec) Conditioning() family.Conditioning {
	return family.Conditioning{Classes: s.Config.NumClasses}
}

// Process is DDPM.
func (Spec) Process() string { return family.ProcessDDPM }

// Blocks is the depth's numbered blocks.
func (s Spec) Blocks() []family.Blocks {
	return []family.Blocks{{What: "backbone depth", Prefix: Prefix + "layers.", Count: s.Config.Depth}}
}

// Shapes lists the network's tensors under the official names.
func (s Spec) Shapes() map[string][]int { return Shapes(s.Config) }

// ParamGroups returns the groups of a tensor Shapes lists (ParamGroups);
// nil for another name.
func (s Spec) ParamGroups(name string) []string {
	if _, ok := s.Shapes()[name]; !ok {
		return nil
	}
	return ParamGroups(name)
}

// Build makes the network from its stored tensors.
func (s Spec) Build(ts map[string]loaders.Dense) (family.Backbone, error) {
	return New(s.Config, ts)
}

// FLOPs counts what Network.FLOPs counts, from the config.
func (s Spec) FLOPs(lengths []int) float64 { return (&Network{Config: s.Config}).FLOPs(lengths) }

// samplingSteps is the DDPM steps DC-DiT samples with unless told (DiT's).
const samplingSteps = 250

// Presets lists the main networks of the DC-DiT paper's scales
// (dc.Presets, PresetConfig), heads replacing their head count when
// positive; each one's scaffold is the dc.Preset of its name.
func (Family) Presets(heads int) []family.Preset {
	out := make([]family.Preset, len(dc.Presets))
	for i, p := range dc.Presets {
		c := PresetConfig(p)
		if heads > 0 {
			c.Heads = heads
		}
		out[i] = family.Preset{Name: p.Name, Backbone: Spec{Config: c}}
	}
	return out
}

// Steps is DiT's 250 DDPM steps.
func (Family) Steps() int { return samplingSteps }
