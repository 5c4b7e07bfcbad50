package tinydit

import (
	"encoding/json"
	"fmt"
	"maps"

	"github.com/nlpodyssey/spago/mat"

	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/loaders"
	"github.com/dcdit/dcdit/ops"
	"github.com/dcdit/dcdit/params"
)

// TeacherConfig sizes a Teacher: its backbone, and the latents its patch
// embedding and final layer read and write. The latent grid is
// Backbone.GridSize on each side.
type TeacherConfig struct {
	Backbone   Config `json:"backbone"`
	InChannels int    `json:"in_channels"` // C
	PatchSize  int    `json:"patch_size"`  // p, dividing GridSize
}

// Validate checks the config.
func (c *TeacherConfig) Validate() error {
	if err := c.Backbone.Validate(); err != nil {
		return err
	}
	if err := family.CheckBounds(
		family.Bound{Name: "tinydit in_channels", V: c.InChannels, Max: family.MaxChannels},
		family.Bound{Name: "tinydit patch_size", V: c.PatchSize, Max: family.MaxGridSide},
	); err != nil {
		return err
	}
	if err := family.CheckPositive(
		family.Bound{Name: "tinydit in_channels", V: c.InChannels}, family.Bound{Name: "tinydit patch_size", V: c.PatchSize},
	); err != nil {
		return err
	}
	if c.Backbone.GridSize%c.PatchSize != 0 {
		return fmt.Errorf("tinydit patch_size %d does not divide grid_size %d", c.PatchSize, c.Backbone.GridSize)
	}
	return nil
}

// OutChannels is 2C: DDPM's ε and its learned variance value per latent
// channel.
func (c *TeacherConfig) OutChannels() int { return 2 * c.InChannels }

// Teacher is TinyDiT as a fixed-patch diffusion model: a patch embedding
// (a Linear over each p×p patch's C·p² values, ordered channel, row,
// column), the Backbone on the patch grid (each patch at its centre), and
// a final layer (RMSNorm, shift and scale from the conditioning, a Linear
// to the patch's 2C·p² outputs). It is trained as DiT is, with DDPM and a
// learned σ (TrainStep, through distill.Diffusion), and is the frozen teacher DC models are
// distilled onto and evaluated against: a family.Teacher, saved (Save)
// and opened (LoadTeacher, family.OpenTeacher) in a file of its own.
type Teacher struct {
	Config   *TeacherConfig
	Backbone *Backbone
	params   *params.Set
}

var (
	_ family.Teacher = (*Teacher)(nil)
	_ family.Trainee = (*Teacher)(nil)
)

// headShapes lists the teacher's own tensors: the patch embedding and the
// final layer.
func (c *TeacherConfig) headShapes() map[string][]int {
	D, in, out := c.Backbone.Width, c.InChannels*c.PatchSize*c.PatchSize, c.OutChannels()*c.PatchSize*c.PatchSize
	return map[string][]int{
		"x_embedder.proj.weight":        {D, in},
		"x_embedder.proj.bias":          {D},
		"final_layer.norm.weight":       {D},
		"final_layer.modulation.weight": {2 * D, D},
		"final_layer.modulation.bias":   {2 * D},
		"final_layer.linear.weight":     {out, D},
		"final_layer.linear.bias":       {out},
	}
}

// NewTeacher builds a freshly initialised teacher (Init's rules; the final
// layer's Linear starts at zero, as DiT's does, so the teacher starts by
// predicting nothing). Its backbone's tensors keep their own names (no
// prefix); the teacher's parameters, the backbone's included, are one
// arena (Parameters).
func NewTeacher(c *TeacherConfig, seed uint64) (*Teacher, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	ts := initTensors(c.Backbone.Shapes(""), "", seed)
	maps.Copy(ts, initTensors(c.headShapes(), "", seed+1))
	for _, name := range []string{"final_layer.linear.weight", "final_layer.linear.bias"} {
		clear(ts[name].Data)
	}
	return newTeacher(c, ts)
}

// newTeacher builds a teacher of a validated config from its tensors,
// named as Shapes names them, copying their values.
func newTeacher(c *TeacherConfig, ts map[string]loaders.Dense) (*Teacher, error) {
	bb, err := New(&c.Backbone, ts, "")
	if err != nil {
		return nil, err
	}
	head, err := dc.NewParams(ts, c.headShapes(), "tinydit teacher")
	if err != nil {
		return nil, err
	}
	joint, err := params.Join(bb.params, head)
	if err != nil {
		return nil, fmt.Errorf("tinydit: %w", err)
	}
	return &Teacher{Config: c, Backbone: bb, params: joint}, nil
}

// Shapes lists every tensor of a teacher of this config under its own
// name: the backbone's and the teacher's patch embedding and final layer.
func (c *TeacherConfig) Shapes() map[string][]int {
	s := c.Backbone.Shapes("")
	maps.Copy(s, c.headShapes())
	return s
}

// Parameters returns the teacher's parameters, backbone and head in one
// arena: what a trainer updates, and what is frozen
// (SetRequiresGrad(false)) once it teaches.
func (t *Teacher) Parameters() *params.Set { return t.params }

// Forward predicts latents x [B, C, G, G] under in: the raw output
// [B·(G/p)², 2C·p²], one row per patch in raster order, its values ordered
// (channel, row, column) as dc.ToTokens orders a cell. It keeps a graph
// when the parameters track gradients.
func (t *Teacher) Forward(x []float32, in cond.Input) (mat.Tensor, error) {
	c := t.Config
	C, G, p := c.InChannels, c.Backbone.GridSize, c.PatchSize
	B, side := in.Samples(), G/p
	if len(x) != B*C*G*G {
		return nil, fmt.Errorf("tinydit: teacher: %d latent values for %d samples, want [%d %d %d %d]", len(x), B, B, C, G, G)
	}
	cv, err := t.Backbone.Condition(in)
	if err != nil {
		return nil, err
	}
	T := side * side
	offsets, pos := make([]int, B+1), make([]float64, 0, 2*B*T)
	for s := range B {
		offsets[s+1] = (s + 1) * T
		for i := range T {
			// A patch sits at its centre on the latent grid.
			pos = append(pos, float64(p*(i/side))+float64(p-1)/2, float64(p*(i%side))+float64(p-1)/2)
		}
	}
	tokens := constant(B*T, C*p*p, dc.ToTokens(x, B, C, G, G, p))
	h := ops.Linear(tokens, t.get("x_embedder.proj.weight"), t.get("x_embedder.proj.bias")) // (B·T, D)
	h, err = t.Backbone.Forward(h, cv, offsets, pos)
	if err != nil {
		return nil, err
	}
	D := c.Backbone.Width
	mod := ops.Linear(ops.SiLU(cv.Vector()), t.get("final_layer.modulation.weight"), t.get("final_layer.modulation.bias")) // (B, 2D)
	h = ops.Modulate(ops.RMSNorm(h, t.get("final_layer.norm.weight"), c.Backbone.NormEps), ops.SliceCols(mod, 0, D), ops.SliceCols(mod, D, 2*D), offsets)
	return ops.Linear(h, t.get("final_layer.linear.weight"), t.get("final_layer.linear.bias")), nil // (B·T, 2C·p²)
}

func (t *Teacher) get(name string) mat.Tensor { return t.params.Get(name) }

// Predict returns the raw output [B, 2C, h, w] for latents xt
// [B, C, h, w] at DDPM timesteps in.T and labels in.Labels, without a
// graph.
func (t *Teacher) Predict(xt []float32, in cond.Input, h, w int) ([]float32, error) {
	c := t.Config
	if G := c.Backbone.GridSize; h != G || w != G {
		return nil, fmt.Errorf("tinydit: the teacher takes %d×%d latents, got %d×%d", G, G, h, w)
	}
	if t.params.RequiresGrad() {
		t.params.SetRequiresGrad(false)
		defer t.params.SetRequiresGrad(true)
	}
	out, err := t.Forward(xt, in)
	if err != nil {
		return nil, err
	}
	return dc.FromTokens(mat.Data[float32](out.Value()), in.Samples(), c.OutChannels(), h, w, c.PatchSize), nil
}

// TrainStep runs the teacher with a graph on latents xt [B, C, h, w]
// under in, hands its output [B, 2C, h, w] to loss, and back-propagates
// the gradient loss fills (family.Trainee: distill.Diffusion trains the
// teacher on its process's loss, DDPM's hybrid loss with a learned σ).
func (t *Teacher) TrainStep(xt []float32, in cond.Input, h, w int, loss func(out, grad []float32) error) error {
	c := t.Config
	if G := c.Backbone.GridSize; h != G || w != G {
		return fmt.Errorf("tinydit: the teacher takes %d×%d latents, got %d×%d", G, G, h, w)
	}
	out, err := t.Forward(xt, in)
	if err != nil {
		return err
	}
	B, O, p := in.Samples(), c.OutChannels(), c.PatchSize
	img := dc.FromTokens(mat.Data[float32](out.Value()), B, O, h, w, p)
	grad := make([]float32, len(img))
	err = loss(img, grad)
	if err == nil {
		err = ops.BackwardFrom(out, dc.ToTokens(grad, B, O, h, w, p))
	}
	// The graph is done with: its buffers serve the next step.
	ops.Release(out)
	return err
}

// InChannels is C.
func (t *Teacher) InChannels() int { return t.Config.InChannels }

// OutChannels is 2C.
func (t *Teacher) OutChannels() int { return t.Config.OutChannels() }

// Grid is the latent grid the position map was trained on, GridSize on
// each side.
func (t *Teacher) Grid() (rows, cols int) {
	return t.Config.Backbone.GridSize, t.Config.Backbone.GridSize
}

// Conditioning is class labels, NumClasses being the null class.
func (t *Teacher) Conditioning() family.Conditioning {
	return family.Conditioning{Classes: t.Config.Backbone.NumClasses}
}

// Process is DDPM, with the learned σ in the last C channels.
func (t *Teacher) Process() string { return family.ProcessDDPM }

// Guidance guides every ε channel by s: u + s·(c − u) on all C of them,
// as diffusers' DiT pipeline does (DiT's forward_with_cfg guides only its
// first three, a quirk kept there for reproducibility that a family of its
// own need not copy). The learned variances are not guided.
func (t *Teacher) Guidance(s float64) (channels int, g float64) { return t.Config.InChannels, s }

// Guide writes u + s·(c − u) into both c and u on the ε channels, in the
// DDPM sampler's float32 arithmetic; each branch keeps its own variances.
func (t *Teacher) Guide(c, u []float32, hw int, s float32) {
	for i := range t.Config.InChannels * hw {
		v := u[i] + s*(c[i]-u[i])
		c[i], u[i] = v, v
	}
}

// Tokens is the patch grid's size.
func (t *Teacher) Tokens(rows, cols int) int {
	p := t.Config.PatchSize
	return (rows / p) * (cols / p)
}

// ForwardFLOPs counts one forward of one rows×cols latent in dc.FLOPs'
// convention: the patch embedding, the backbone over the patch grid
// (Config.FLOPs) and the final layer.
func (t *Teacher) ForwardFLOPs(rows, cols int) float64 {
	c := t.Config
	T, D, pp := float64(t.Tokens(rows, cols)), float64(c.Backbone.Width), float64(c.PatchSize*c.PatchSize)
	mac := func(m, k, n float64) float64 { return 2 * m * k * n }
	embed := mac(T, float64(c.InChannels)*pp, D)
	final := mac(1, D, 2*D) + mac(T, D, float64(c.OutChannels())*pp)
	return embed + c.Backbone.FLOPs([]int{t.Tokens(rows, cols)}) + final
}

// Describe is the config as JSON.
func (t *Teacher) Describe() string {
	b, _ := json.Marshal(t.Config) // a struct of numbers always encodes
	return "tinydit " + string(b)
}
