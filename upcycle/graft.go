package upcycle

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"github.com/dcdit/dcdit/dc"
	"github.com/dcdit/dcdit/family"
	"github.com/dcdit/dcdit/params"
)

// Scaffold holds the choices a recipe makes about the new modules.
type Scaffold struct {
	WidthFactor     int     // E = D / WidthFactor (4 in the paper)
	EncoderBlocks   int     // conv blocks before routing (2)
	DecoderBlocks   int     // conv blocks after de-chunking (2)
	Sigma           float64 // de-chunk Gaussian σ in latent-grid units (1)
	TargetN         float64 // ratio-loss target downsampling N (4)
	RatioLossWeight float64 // ratio-loss weight α (0.03)
	RatioBatchSize  int     // ratio-loss group size (0: the whole batch)
	NormGroups      int     // GroupNorm groups of the conv blocks (32)
	RouterGroups    int     // GroupNorm groups of the router's scorer (8)
	// RouterInit is "official" (the default: DC-DiT's random init) or
	// "predictability" (see PredictabilityPrior).
	RouterInit string
	// RouterDimFactor sets the router's bottleneck D / RouterDimFactor
	// (0: 4, the reference's).
	RouterDimFactor int
	// EncoderInit is "official" (the default: DC-DiT's random init) or
	// "patch" (see EncoderPrior).
	EncoderInit string
	// PatchSize is the side of the latent patch a scaffold cell holds (0
	// or 1: the official DC-DiT's cell per latent position; the teacher's
	// patch size lets the scaffold keep the teacher's patch grid).
	PatchSize int
	// WideHead adds the wide output head (dc.Config.WideHead); Graft
	// starts it as the teacher's final layer.
	WideHead bool
	// NoEncoderNorm drops the encoder's final RMSNorm
	// (dc.Config.NoEncoderNorm).
	NoEncoderNorm bool
	// RelativeResidual is dc.Config.RelativeResidual.
	RelativeResidual bool
	// LatentSkip is dc.Config.LatentSkip (InitScaffold starts it as the
	// identity on the predicted noise).
	LatentSkip bool
	// CondNorm is dc.Config.CondNorm, the conditioning adaptor
	// (InitScaffold starts it as a plain LayerNorm).
	CondNorm bool
	// SpreadDrop is dc.Config.SpreadDrop: ρ keeps boundaries spread over
	// the grid (dc.SpreadDrop).
	SpreadDrop bool
	// TokenEmbedder is dc.Config.TokenEmbedder; the graft starts it as
	// the teacher's patch embedding (cells of its patch).
	TokenEmbedder bool
	// DroppedContext is dc.Config.DroppedContext (InitScaffold starts its
	// convolution at zero).
	DroppedContext bool
	// ChosenEmbedding is dc.Config.ChosenEmbedding (InitScaffold starts
	// it at zero).
	ChosenEmbedding bool
}

// StartAsTeacher returns s set so that a graft starts as its teacher:
// cells of the teacher's patch, the encoder as its patch embedding without
// the encoder's norm, the wide head as its final layer, and the residual
// relative to each cell's kept token. A router that keeps every cell then
// predicts what the teacher predicts, and training starts from the
// teacher to learn what the dropped cells need (the toy recipes' setting).
func (s Scaffold) StartAsTeacher(patch int) Scaffold {
	s.PatchSize, s.EncoderInit, s.NoEncoderNorm, s.WideHead, s.RelativeResidual = patch, "patch", true, true, true
	return s
}

// startsFromPatchEmbedding reports whether the graft reads the teacher's
// patch embedding: the patch encoder prior or the token embedder starts
// from it.
func (s Scaffold) startsFromPatchEmbedding() bool {
	return s.EncoderInit == "patch" || s.TokenEmbedder
}

// DefaultScaffold is the paper's setting.
func DefaultScaffold() Scaffold {
	return Scaffold{WidthFactor: 4, EncoderBlocks: 2, DecoderBlocks: 2, Sigma: 1, TargetN: 4,
		RatioLossWeight: 0.03, NormGroups: 32, RouterGroups: 8}
}

// Config returns the DC scaffold's configuration around a backbone of
// width D (dc.Backbone.Width) whose conditioning vector has width
// condWidth (dc.Backbone.CondWidth: D for DiT and DC-DiT's main network,
// the adaLN width for Z-Image), on a rows×cols latent grid. It is the one
// derivation: Graft and the recipe planner (package recipes) both call
// it.
func (s Scaffold) Config(inChannels, outChannels, rows, cols, D, condWidth int) (*dc.Config, error) {
	if s.WidthFactor < 1 || D%s.WidthFactor != 0 {
		return nil, fmt.Errorf("upcycle: width factor %d does not divide the backbone width %d", s.WidthFactor, D)
	}
	rf := s.RouterDimFactor
	if rf == 0 {
		rf = 4
	}
	if rf < 1 || D%rf != 0 {
		return nil, fmt.Errorf("upcycle: backbone width %d: the router bottleneck D/%d needs a multiple of %d", D, rf, rf)
	}
	c := &dc.Config{
		InChannels: inChannels, OutChannels: outChannels, GridRows: rows, GridCols: cols,
		EncDecDim: D / s.WidthFactor, ModelDim: D, CondDim: condWidth, RouterDim: D / rf,
		EncoderBlocks: s.EncoderBlocks, DecoderBlocks: s.DecoderBlocks,
		NormGroups: s.NormGroups, RouterGroups: s.RouterGroups,
		Sigma: s.Sigma, TargetN: s.TargetN, RatioLossWeight: s.RatioLossWeight, RatioBatchSize: s.RatioBatchSize,
		WideHead: s.WideHead, NoEncoderNorm: s.NoEncoderNorm, RelativeResidual: s.RelativeResidual,
		LatentSkip: s.LatentSkip, CondNorm: s.CondNorm, SpreadDrop: s.SpreadDrop, TokenEmbedder: s.TokenEmbedder, DroppedContext: s.DroppedContext,
		ChosenEmbedding: s.ChosenEmbedding,
	}
	if s.PatchSize > 1 {
		c.PatchSize = s.PatchSize
	}
	if err := c.Validate(); err != nil {
		return nil, fmt.Errorf("upcycle: %w", err)
	}
	return c, nil
}

// PatchEmbedding is a backbone's patch embedding as EncoderPrior reads
// it (family.PatchEmbedding).
type PatchEmbedding = family.PatchEmbedding

// EncoderPrior re-initialises the latent embedder and the encoder so
// that, at every grid position (r, c), the encoder computes the teacher's
// patch embedding pe of the p×p patch whose top-left cell is (r, c) (with
// scaffold cells of the teacher's patch size: of the cell's own patch):
//
//   - the 3×3 latent embedder copies that patch's C·p² values into its
//     first channels (taps at offsets 0 … p−1 right of and below the
//     centre; the centre tap alone when a cell is a patch) and zeroes the
//     others;
//   - every encoder block's second convolution starts at zero, so each
//     block passes its skip path through (the identity, or the 1×1
//     skip_proj of the block that widens E to D), as adaLN-Zero starts a
//     DiT block as the identity;
//   - the widening skip_proj is the teacher's patch embedding (weights
//     reordered to the copied channels, its bias);
//   - the encoder's RMSNorm weight (if it has one: dc.Config.NoEncoderNorm)
//     is the embedding's expected RMS for unit-variance latents,
//     √(mean_d(‖W_d‖² + b_d²)), so the normalised tokens keep about the
//     teacher's scale.
//
// At positions where both coordinates are multiples of p, the main
// network then receives exactly the teacher's tokens (up to the per-token
// RMS normalisation, where the encoder keeps its norm) instead of random
// features it would first have to be taught to read: the grafted blocks
// contribute from the first step, and with them the routing decisions
// matter. The official DC-DiT trains
// from scratch and has no teacher to start from.
func EncoderPrior(cfg *dc.Config, ts map[string]dc.Tensor, pe PatchEmbedding) error {
	p, C, E, D := pe.Patch, cfg.InChannels, cfg.EncDecDim, cfg.ModelDim
	cellIsPatch := cfg.Patch() == p
	if !cellIsPatch && cfg.Patch() != 1 {
		return fmt.Errorf("upcycle: encoder init \"patch\": scaffold cells of %d×%d latents and teacher patches of %d×%d; want cells of 1 or of the teacher's patch", cfg.Patch(), cfg.Patch(), p, p)
	}
	if p > 2 && !cellIsPatch {
		return fmt.Errorf("upcycle: encoder init \"patch\": patch size %d, the 3×3 latent embedder reaches patches of at most 2", p)
	}
	if C*p*p > E {
		return fmt.Errorf("upcycle: encoder init \"patch\": a patch holds %d values, more than the encoder width E = %d", C*p*p, E)
	}
	if len(pe.Weight) != D*C*p*p || len(pe.Bias) != D {
		return fmt.Errorf("upcycle: encoder init \"patch\": the patch embedding has %d weights and %d biases, want [%d %d] and [%d]", len(pe.Weight), len(pe.Bias), D, C*p*p, D)
	}
	if cfg.EncoderBlocks < 1 || E == D {
		return fmt.Errorf("upcycle: encoder init \"patch\": needs an encoder block that widens E = %d to D = %d", E, D)
	}
	tw, tb := pe.Weight, pe.Bias
	// ch is the embedder channel that carries latent channel c at patch
	// offset (dy, dx), the index of that value in a flattened patch.
	ch := func(c, dy, dx int) int { return (c*p+dy)*p + dx }

	emb := ts["x_embedder.proj.weight"].Data // [E, C·q², 3, 3] for cells of q×q
	clear(emb)
	clear(ts["x_embedder.proj.bias"].Data)
	for c := range C {
		for dy := range p {
			for dx := range p {
				if k := ch(c, dy, dx); cellIsPatch {
					// A cell's values are ordered (c, dy, dx) too (dc.ToTokens).
					emb[(k*C*p*p+k)*9+4] = 1
				} else {
					emb[(k*C+c)*9+(1+dy)*3+(1+dx)] = 1
				}
			}
		}
	}
	for i := range cfg.EncoderBlocks {
		prefix := fmt.Sprintf("hnet.encoder.layers.%d.", i)
		clear(ts[prefix+"conv2.weight"].Data)
		clear(ts[prefix+"conv2.bias"].Data)
		skip, ok := ts[prefix+"skip_proj.weight"]
		if !ok {
			continue
		}
		clear(skip.Data) // [D, E, 1, 1]
		for d := range D {
			for c := range C {
				for dy := range p {
					for dx := range p {
						skip.Data[d*E+ch(c, dy, dx)] = tw[d*C*p*p+pe.Index(c, dy, dx)]
					}
				}
			}
		}
		copy(ts[prefix+"skip_proj.bias"].Data, tb)
	}
	var ms float64
	for d := range D {
		s := float64(tb[d]) * float64(tb[d])
		for _, v := range tw[d*C*p*p : (d+1)*C*p*p] {
			s += float64(v) * float64(v)
		}
		ms += s / float64(D)
	}
	if w, ok := ts["hnet.encoder.rmsnorm.weight"]; ok {
		fill(w.Data, float32(math.Sqrt(ms)))
	}
	return nil
}

// tokenEmbedderPrior starts the token embedder (dc.Config.TokenEmbedder)
// as the teacher's patch embedding pe, its input columns reordered from
// the teacher's patch layout to the cell's (c, dy, dx): the backbone then
// reads, at every kept cell, the token the teacher's blocks read there.
// Cells must be the teacher's patches.
func tokenEmbedderPrior(cfg *dc.Config, ts map[string]dc.Tensor, pe PatchEmbedding) error {
	p, C, D := pe.Patch, cfg.InChannels, cfg.ModelDim
	if cfg.Patch() != p {
		return fmt.Errorf("upcycle: token embedder: scaffold cells of %d×%d latents and teacher patches of %d×%d; want cells of the teacher's patch", cfg.Patch(), cfg.Patch(), p, p)
	}
	n := C * p * p
	if len(pe.Weight) != D*n || len(pe.Bias) != D {
		return fmt.Errorf("upcycle: token embedder: the patch embedding has %d weights and %d biases, want [%d %d] and [%d]", len(pe.Weight), len(pe.Bias), D, n, D)
	}
	w := ts["token_embedder.weight"].Data // [D, C·p²], columns (c, dy, dx)
	for d := range D {
		for c := range C {
			for dy := range p {
				for dx := range p {
					w[d*n+(c*p+dy)*p+dx] = pe.Weight[d*n+pe.Index(c, dy, dx)]
				}
			}
		}
	}
	copy(ts["token_embedder.bias"].Data, pe.Bias)
	return nil
}

// wideHeadPrior starts the wide head (dc.Config.WideHead) as the teacher's
// own final layer f — its adaLN modulation and its projection, the outputs
// reordered from DiT's unpatchify order (dy, dx, channel) to the cell's
// (channel, dy, dx) — and residual_proj at zero (H-Net's own init, which
// the official DC-DiT overwrites). With the patch encoder prior and cells
// of the teacher's patch size, a grafted model whose router keeps every
// cell and whose de-chunk passes the kept tokens through then predicts
// exactly as the teacher does (without the encoder's RMSNorm; with it, up
// to its per-token normalisation): training starts from the teacher and
// learns what the dropped cells need. Cells of another size leave the
// head at zero.
func wideHeadPrior(cfg *dc.Config, ts map[string]dc.Tensor, f family.FinalLayer) error {
	p, D, O := f.Patch, cfg.ModelDim, f.Out
	clear(ts["hnet.residual_proj.weight"].Data)
	if b, ok := ts["hnet.residual_proj.bias"]; ok {
		clear(b.Data)
	}
	if cfg.Patch() != p {
		return nil
	}
	if O != cfg.OutChannels || f.Width != D {
		return fmt.Errorf("upcycle: wide head: the teacher predicts %d channels at width %d, the scaffold %d at %d", O, f.Width, cfg.OutChannels, D)
	}
	for _, name := range []string{"adaLN_modulation.1.weight", "adaLN_modulation.1.bias", "linear.weight", "linear.bias"} {
		dst := ts["wide_head."+name]
		want := len(dst.Data)
		modulation := !strings.HasPrefix(name, "linear.")
		if modulation && f.NoShift {
			want /= 2
		}
		v, ok := f.Tensor(name)
		if !ok || len(v) != want {
			return fmt.Errorf("upcycle: wide head: the teacher lacks final_layer.%s with %d values", name, want)
		}
		if modulation {
			// Shift rows first, then scale: a layer without shift
			// fills the scale rows and leaves the shift at zero.
			clear(dst.Data)
			copy(dst.Data[len(dst.Data)-len(v):], v)
			continue
		}
		per := len(v) / (p * p * O) // D for the weight, 1 for the bias
		for dy := range p {
			for dx := range p {
				for c := range O {
					from, to := (dy*p+dx)*O+c, (c*p+dy)*p+dx
					copy(dst.Data[to*per:(to+1)*per], v[from*per:(from+1)*per])
				}
			}
		}
	}
	return nil
}

// PredictabilityPrior re-initialises the router so that it starts out as
// its name says, scoring each token by how badly its neighbours predict
// it: the context predictor becomes the mean of the 8 neighbours (per
// channel), the scorer's first convolution passes the residual through as
// ± pairs, and the last 1×1 sums the pairs after GroupNorm and SiLU
// (SiLU(z) + SiLU(−z) grows with |z|), so the logit grows with the local
// residual's size, offset so that about 1/N of the tokens of an average
// grid start above one half. The official DC-DiT starts the router at
// random and lets it learn this over a long run; a short upcycling run
// that must show the behaviour starts from it. The projection to the
// bottleneck keeps its random init.
func PredictabilityPrior(cfg *dc.Config, ts map[string]dc.Tensor) {
	R := cfg.RouterDim
	clear(ts["hnet.routing_module.context_predictor.weight"].Data)
	clear(ts["hnet.routing_module.context_predictor.bias"].Data)
	cp := ts["hnet.routing_module.context_predictor.weight"].Data // [R, R, 3, 3]
	for c := range R {
		for k := range 9 {
			if k != 4 {
				cp[(c*R+c)*9+k] = 1.0 / 8
			}
		}
	}
	sc := ts["hnet.routing_module.residual_scorer.0.weight"].Data // [R, R, 3, 3]
	clear(sc)
	clear(ts["hnet.routing_module.residual_scorer.0.bias"].Data)
	for k := range R / 2 {
		sc[((2*k)*R+k)*9+4] = 1
		sc[((2*k+1)*R+k)*9+4] = -1
	}
	out := ts["hnet.routing_module.residual_scorer.3.weight"].Data // [1, R, 1, 1]
	// gain is the logit change per unit of the pairs' mean SiLU(z) + SiLU(−z).
	const gain = 4
	for i := range out {
		out[i] = 2 * gain / float32(R)
	}
	// E[SiLU(z) + SiLU(−z)] ≈ 0.45 for z ~ N(0, 1): the average token
	// starts at −ln(N−1), as the official init does.
	ts["hnet.routing_module.residual_scorer.3.bias"].Data[0] = float32(-math.Log(cfg.TargetN-1) - gain*0.45)
}

// InitScaffold returns freshly initialised scaffold tensors, as the
// official DC-DiT builds them: PyTorch's default init for the convolutions
// (weights and biases U(±1/√fan_in)), Xavier-uniform Linear weights with
// zero biases (DiT's initialize_weights, which also covers the latent
// embedder's convolution and residual_proj), GroupNorm and RMSNorm at
// weight 1 and bias 0, the router's last bias at −ln(N−1) (so that
// sigmoid gives 1/N, about the target keep rate), and the final layer at
// zero.
func InitScaffold(cfg *dc.Config, seed uint64) map[string]dc.Tensor {
	rng := rand.New(rand.NewPCG(seed, 0x5caff01d))
	shapes := dc.ScaffoldShapes(cfg)
	ts := make(map[string]dc.Tensor, len(shapes))
	// Draw in name order so a seed gives the same scaffold everywhere.
	names := make([]string, 0, len(shapes))
	for k := range shapes {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, name := range names {
		shape := shapes[name]
		n, fanIn := 1, 1
		for i, d := range shape {
			n *= d
			if i > 0 {
				fanIn *= d
			}
		}
		t := dc.Tensor{Shape: shape, Data: make([]float32, n)}
		ts[name] = t
		base := strings.TrimSuffix(strings.TrimSuffix(name, ".weight"), ".bias")
		isBias := strings.HasSuffix(name, ".bias")
		switch {
		case strings.HasPrefix(name, "final_layer."), strings.HasPrefix(name, "wide_head."):
			// Zero: the model starts by predicting nothing.
		case name == "latent_skip.weight":
			// The identity from each input value to the same position's
			// predicted noise (the first CellIn outputs); no scale yet.
			for i := range min(shape[0], shape[1]) {
				t.Data[i*shape[1]+i] = 1
			}
		case strings.HasPrefix(name, "latent_skip."):
			// Zero: the skip's scale starts at 1.
		case name == "dropped_context.conv.weight", name == "hnet.decoder.chosen_embedding":
			// Zero: the kept tokens, and the decoder's conditioning, start
			// as they were.
		case isNorm(base):
			if !isBias {
				fill(t.Data, 1)
			}
		case base == "hnet.routing_module.residual_scorer.3" && isBias:
			fill(t.Data, float32(-math.Log(cfg.TargetN-1)))
		case isLinear(base):
			if !isBias {
				xavier(rng, t.Data, shape[0], fanIn)
			}
		default: // convolutions
			wShape := shapes[base+".weight"]
			fan := 1
			for _, d := range wShape[1:] {
				fan *= d
			}
			bound := 1 / math.Sqrt(float64(fan))
			for i := range t.Data {
				t.Data[i] = float32(bound * (2*rng.Float64() - 1))
			}
		}
	}
	return ts
}

// isNorm reports GroupNorm and RMSNorm modules by their reference names.
func isNorm(base string) bool {
	return strings.HasSuffix(base, ".norm1") || strings.HasSuffix(base, ".norm2") ||
		strings.HasSuffix(base, ".rmsnorm") || base == "hnet.routing_module.residual_scorer.1" || base == "cond_norm"
}

// isLinear reports the modules DiT's initialize_weights treats as Linear:
// the nn.Linear layers and the latent embedder's convolution.
func isLinear(base string) bool {
	return strings.HasSuffix(base, ".cond_proj.1") || base == "hnet.residual_proj" || base == "x_embedder.proj" || base == "token_embedder" || base == "dropped_context.proj"
}

func xavier(rng *rand.Rand, v []float32, fanOut, fanIn int) {
	bound := math.Sqrt(6 / float64(fanIn+fanOut))
	for i := range v {
		v[i] = float32(bound * (2*rng.Float64() - 1))
	}
}

func fill(v []float32, x float32) {
	for i := range v {
		v[i] = x
	}
}

// Grafted is a DC model whose scaffold and backbone parameters share one
// arena, ready for one optimiser.
type Grafted struct {
	Model  *dc.Model
	Params *params.Set
}

// NewGrafted grafts (see Graft) and joins the parameters into one arena.
func NewGrafted(t family.Teacher, s Scaffold, rows, cols int, seed uint64) (*Grafted, error) {
	m, err := Graft(t, s, rows, cols, seed)
	if err != nil {
		return nil, err
	}
	p, err := JoinParams(m)
	if err != nil {
		return nil, err
	}
	return &Grafted{Model: m, Params: p}, nil
}

// JoinParams moves a DC model's scaffold and backbone parameters into one
// arena and returns it. The names must not clash: a DiT or Z-Image
// backbone keeps its own names under dc.BackbonePrefix (PrefixNames).
func JoinParams(m *dc.Model) (*params.Set, error) {
	bb := m.Backbone.Parameters()
	if bb == nil {
		kind := family.KindOf(m.Backbone)
		return nil, fmt.Errorf("upcycle: the %q backbone has no parameter arena to join", kind)
	}
	for _, q := range bb.List() {
		if _, clash := m.Params.Lookup(q.Name); clash {
			kind := family.KindOf(m.Backbone)
			return nil, fmt.Errorf("upcycle: the %q backbone's parameter %q has the name of one of the scaffold's: a backbone that keeps its own names joins a DC model under %q (rename its model with PrefixNames(dc.BackbonePrefix))", kind, q.Name, dc.BackbonePrefix)
		}
	}
	p, err := params.Join(m.Params, bb)
	if err != nil {
		return nil, fmt.Errorf("upcycle: join the scaffold's and the backbone's parameters: %w", err)
	}
	return p, nil
}
