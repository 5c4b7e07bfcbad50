package family

import (
	"github.com/dcdit/dcdit/cond"
	"github.com/dcdit/dcdit/params"
)

// The diffusion processes a teacher names (Teacher.Process); package
// diffusion implements both.
const (
	ProcessDDPM         = "ddpm"          // ε and a learned σ, DDPM timesteps as model times
	ProcessFlowMatching = "flow_matching" // velocity, model time 1 − σ
)

// Teacher is a family's fixed-patch model as the frozen reference a DC
// model is distilled onto and evaluated against, with the rules it was
// trained under: its diffusion process and its guidance. Distillation,
// evaluation and teacher sampling use only these methods, so a family
// that provides a Teacher is distilled and evaluated like the built-in
// ones.
type Teacher interface {
	// Predict returns the raw output [B, OutChannels, h, w] for latents
	// xt [B, InChannels, h, w] under in (one model time, in the process's
	// convention, and one label or caption per sample), keeping no graph.
	Predict(xt []float32, in cond.Input, h, w int) ([]float32, error)
	// InChannels and OutChannels are the latent channels it reads and the
	// channels Predict returns (DDPM with a learned σ: 2·InChannels).
	InChannels() int
	OutChannels() int
	// Grid is the latent grid it takes, rows and columns; 0, 0 when it
	// takes any grid its patch size divides.
	Grid() (rows, cols int)
	// Conditioning says what it is conditioned on (the null label of
	// classifier-free guidance is Classes; the empty caption is the
	// unconditional branch of a caption-conditioned one).
	Conditioning() Conditioning
	// Process is the diffusion process it was trained with
	// (ProcessDDPM, ProcessFlowMatching).
	Process() string
	// Guidance says how sampling guides at scale s: the number of leading
	// output channels it guides and the factor g of its guided prediction
	// u + g·(c − u). Guidance is on for s > 1.
	Guidance(s float64) (channels int, g float64)
	// Guide applies the family's guidance rule to one sample's
	// conditional and unconditional outputs c and u ([OutChannels·hw]
	// each), writing the guided output into both, in the family's own
	// arithmetic (it is what the family's reference sampler computes,
	// bit for bit).
	Guide(c, u []float32, hw int, s float32)
	// Tokens and ForwardFLOPs are one unguided forward of one rows×cols
	// latent: its image tokens and its FLOPs (the dc.FLOPs convention).
	Tokens(rows, cols int) int
	ForwardFLOPs(rows, cols int) float64
	// Parameters are its tensors (frozen by whoever distils).
	Parameters() *params.Set
	// Describe names its configuration (a run's fingerprint records it).
	Describe() string
}

// CaptionCosted is implemented by a caption-conditioned Teacher whose
// forward's FLOPs depend on the caption's length, which ForwardFLOPs
// fixes: a sampler that knows each caption's length counts with it.
type CaptionCosted interface {
	// CaptionFLOPs counts one forward of one rows×cols latent under a
	// caption of captionLen tokens, as ForwardFLOPs does for its own.
	CaptionFLOPs(rows, cols, captionLen int) float64
}

// Trainee is a family's fixed-patch model trained on its own diffusion
// objective: a teacher trained from scratch or onwards. The objective
// (noise, inputs, loss) is the process's; the family runs the model.
type Trainee interface {
	// TrainStep runs the model with a graph on latents xt [B, InChannels,
	// h, w] under in, hands its output [B, OutChannels, h, w] to loss,
	// which fills grad (the same layout) with ∂loss/∂output, and
	// back-propagates grad into the parameters' gradients; the graph is
	// released before it returns.
	TrainStep(xt []float32, in cond.Input, h, w int, loss func(out, grad []float32) error) error
	InChannels() int
	OutChannels() int
	Conditioning() Conditioning
}
