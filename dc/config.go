package dc

import (
	"fmt"
	"regexp"
	"strconv"
)

// Numerical constants of the reference scaffold (AMD-AGI/DynamicChunkingDiT).
const (
	// GroupNormEps is the eps of every GroupNorm (PyTorch's default).
	GroupNormEps = 1e-5
	// RMSNormEps is the eps of the encoder's and decoder's final RMSNorm.
	RMSNormEps = 1e-5
	// FinalNormEps is the eps of the final layer's affine-free LayerNorm.
	FinalNormEps = 1e-6
	// CondNormEps is the eps of the conditioning adaptor's LayerNorm
	// (PyTorch's default; not in the reference).
	CondNormEps = 1e-5
	// ProbClamp bounds the boundary probabilities the de-chunker weights
	// with to [ProbClamp, 1 − ProbClamp].
	ProbClamp = 1e-4
)

// Config is the scaffold's configuration: everything the encoder, router,
// chunker, de-chunker, decoder and ratio loss need besides the backbone.
// Sizes are checked against the weights when a model is built.
type Config struct {
	InChannels  int `json:"in_channels"`  // latent channels C (4)
	OutChannels int `json:"out_channels"` // output channels (2C with learned sigma)
	GridRows    int `json:"grid_rows"`    // latent grid height
	GridCols    int `json:"grid_cols"`    // latent grid width
	// PatchSize is the side of the latent patch one scaffold cell holds
	// (0 means 1: every latent position is a cell, as in the official
	// DC-DiT). A DiT/p upcycled at its own patch size keeps its patch
	// embedding, positions and output layer exactly (package upcycle): the
	// scaffold then runs on the (H/p)×(W/p) patch grid with C·p² values
	// per cell, ordered channel-major (c, dy, dx).
	PatchSize int `json:"patch_size,omitempty"`
	// WideHead adds a second output layer that reads the decoder's input
	// (width D: the de-chunked backbone output plus the residual) —
	// LayerNorm, adaLN from c, Linear(D → cell outputs) — and adds its
	// prediction to the final layer's. An upcycled DiT's own final layer
	// starts there, so a grafted model predicts as its teacher does
	// wherever a cell keeps its token; the official DC-DiT has none.
	WideHead bool `json:"wide_head,omitempty"`
	// NoEncoderNorm drops the RMSNorm that ends the official encoder. An
	// upcycled DiT's blocks were trained on its patch embeddings as they
	// are; normalising each token's RMS changes what they compute (the
	// grafted toy teacher's ε moves by 0.03–0.15 in MSE at init), while
	// without the norm a grafted model can start exactly as its teacher.
	NoEncoderNorm bool `json:"no_encoder_norm,omitempty"`
	// RelativeResidual makes the residual a cell adds to its plugged-back
	// token relative to that token's own: residual_proj (without its bias,
	// which would cancel) of enc minus enc at the kept cell it takes its
	// token from. A kept
	// cell then passes its backbone output on unchanged, whatever
	// residual_proj learns for the dropped ones (the official DC-DiT adds
	// residual_proj(enc) everywhere).
	RelativeResidual bool `json:"relative_residual,omitempty"`
	// LatentSkip adds to every cell's prediction a linear map of how its
	// input differs from that of the kept cell whose token it takes,
	// scaled per output by 1 + Linear(SiLU(c)): (W·(x − x_token)) ⊙
	// (1 + s(c)). Kept cells get nothing from it. A dropped cell's noise
	// differs from its token's by about the difference of their inputs
	// over √(1 − ᾱ_t) — a map the normalised heads learn slowly and this
	// one holds directly (upcycle starts W as the identity on the
	// predicted noise).
	LatentSkip bool `json:"latent_skip,omitempty"`
	// CondNorm puts a LayerNorm with its own weight and bias (cond_norm.*)
	// on the conditioning vector the encoder's and decoder's blocks and
	// the final layer read: the trainable adaptor of DC-Z-Image (paper
	// §4.4), whose frozen timestep embedder gives a vector of the scale
	// Z-Image's blocks expect, not the scale the scaffold's new blocks
	// start from. The wide head and the latent skip, which start as
	// functions of the backbone's own vector, read it as it is.
	CondNorm bool `json:"cond_norm,omitempty"`
	// SpreadDrop makes elastic inference and the multi-budget stages drop
	// boundaries with SpreadDrop instead of TailDrop: as many kept, spread
	// over the grid rather than the highest-probability ones wherever they
	// lie. It is a rule, not weights: the same file runs either way.
	SpreadDrop bool `json:"spread_drop,omitempty"`

	// TokenEmbedder gives the backbone its tokens from a Linear of each
	// kept cell's own latents, token_embedder (upcycle starts it as the
	// teacher's patch embedding), instead of the encoder's output there;
	// the router, the residual and the decoder still read the encoder.
	// An upcycled model's blocks then read the tokens they were trained
	// on, whatever the encoder learns for the dropped cells: an encoder
	// trained to serve them moves the tokens the blocks read, and a dense
	// step stops being its teacher's.
	TokenEmbedder bool `json:"token_embedder,omitempty"`
	// DroppedContext adds to each kept token what its dropped neighbours
	// hold: a 3×3 convolution (dropped_context.conv, started at zero)
	// over the encoder's output projected to E (dropped_context.proj)
	// with every kept cell's row zeroed, read at the kept cells. Where
	// nothing is dropped — ρ 0's kept cells with no dropped neighbour, a
	// dense step — the term is zero and the token is what it was (with
	// TokenEmbedder, the teacher's); where cells are dropped, the blocks
	// see them through the kept tokens beside them, as they see a trained
	// encoder's pooled features, without that encoder moving the tokens
	// of the dense steps.
	DroppedContext bool `json:"dropped_context,omitempty"`
	// ChosenEmbedding adds a learned vector, hnet.decoder.chosen_embedding
	// (started at zero), to the conditioning the decoder and the final
	// layer read, in every sample whose kept cells a Chooser changed
	// (ForwardChoosing, PredictChoosing: a lookback budget). One decoder
	// then fills in around two choices, told which: the router's, to
	// which it and the router fit each other (what ranks ρ 0's dropped
	// cells), and lookback's, the cells a budget keeps in sampling.
	ChosenEmbedding bool `json:"chosen_embedding,omitempty"`

	EncDecDim int `json:"enc_dec_dim"` // E = D / f, the conv blocks' width
	ModelDim  int `json:"model_dim"`   // D, the routing width = the backbone's width
	CondDim   int `json:"cond_dim"`    // width of the conditioning vector
	RouterDim int `json:"router_dim"`  // the router's bottleneck (D/4 in the reference)

	EncoderBlocks int `json:"encoder_blocks"` // conv blocks before routing (E→…→D)
	DecoderBlocks int `json:"decoder_blocks"` // conv blocks after de-chunking (D→E→…)
	NormGroups    int `json:"norm_groups"`    // GroupNorm groups in the conv blocks (32)
	RouterGroups  int `json:"router_groups"`  // GroupNorm groups in the router's scorer (8)

	// Sigma is the de-chunk Gaussian's standard deviation in grid units
	// (1.0 at 256 px).
	Sigma float64 `json:"dechunk_sigma"`
	// TargetN is the ratio loss's target downsampling factor N (> 1).
	TargetN float64 `json:"target_n"`
	// RatioLossWeight is the ratio loss's weight in the training loss.
	RatioLossWeight float64 `json:"ratio_loss_weight"`
	// RatioBatchSize groups the batch for the ratio loss (F and G per group
	// of this many samples, averaged over groups); 0 takes the whole batch.
	RatioBatchSize int `json:"ratio_batch_size"`
}

// Tokens is the number of latent positions rows·cols.
func (c *Config) Tokens() int { return c.GridRows * c.GridCols }

// Patch is the side of a cell's latent patch (PatchSize, at least 1).
func (c *Config) Patch() int { return max(c.PatchSize, 1) }

// CellRows is the height of the scaffold's grid.
func (c *Config) CellRows() int { return c.GridRows / c.Patch() }

// CellCols is the width of the scaffold's grid.
func (c *Config) CellCols() int { return c.GridCols / c.Patch() }

// Cells is the scaffold's sequence length L: the number of cells per
// sample, the most tokens the backbone can see.
func (c *Config) Cells() int { return c.CellRows() * c.CellCols() }

// CellIn is the number of input values per cell, C·p².
func (c *Config) CellIn() int { return c.InChannels * c.Patch() * c.Patch() }

// CellOut is the number of output values per cell, OutChannels·p².
func (c *Config) CellOut() int { return c.OutChannels * c.Patch() * c.Patch() }

// LatentMask spreads a mask over cells [B·Cells] to the latent grid
// [B·rows·cols] (each cell's value on its p×p patch).
func (c *Config) LatentMask(cells []bool) []bool {
	p, L := c.Patch(), c.Cells()
	if p == 1 {
		return cells
	}
	B := len(cells) / L
	out := make([]bool, B*c.Tokens())
	for b := range B {
		for r := range c.GridRows {
			for col := range c.GridCols {
				out[(b*c.GridRows+r)*c.GridCols+col] = cells[b*L+(r/p)*c.CellCols()+col/p]
			}
		}
	}
	return out
}

// CellOf returns the cell that holds latent position l (raster order).
func (c *Config) CellOf(l int) int {
	p := c.Patch()
	return (l/c.GridCols/p)*c.CellCols() + (l%c.GridCols)/p
}

// Validate reports the first inconsistent setting.
func (c *Config) Validate() error {
	pos := []struct {
		name string
		v    int
	}{
		{"in_channels", c.InChannels}, {"out_channels", c.OutChannels}, {"grid_rows", c.GridRows},
		{"grid_cols", c.GridCols}, {"enc_dec_dim", c.EncDecDim}, {"model_dim", c.ModelDim},
		{"cond_dim", c.CondDim}, {"router_dim", c.RouterDim}, {"encoder_blocks", c.EncoderBlocks},
		{"decoder_blocks", c.DecoderBlocks}, {"norm_groups", c.NormGroups}, {"router_groups", c.RouterGroups},
	}
	for _, p := range pos {
		if p.v < 1 {
			return fmt.Errorf("dc: config: %s = %d, want ≥ 1", p.name, p.v)
		}
	}
	if c.PatchSize < 0 || c.GridRows%c.Patch() != 0 || c.GridCols%c.Patch() != 0 {
		return fmt.Errorf("dc: config: patch_size = %d does not divide the %d×%d grid", c.PatchSize, c.GridRows, c.GridCols)
	}
	for _, w := range c.ConvWidths() {
		if w[0]%c.NormGroups != 0 || min(w[0], w[1])%c.NormGroups != 0 {
			return fmt.Errorf("dc: config: conv block %d→%d: widths must be multiples of norm_groups = %d", w[0], w[1], c.NormGroups)
		}
	}
	if c.RouterDim%c.RouterGroups != 0 {
		return fmt.Errorf("dc: config: router_dim = %d is not a multiple of router_groups = %d", c.RouterDim, c.RouterGroups)
	}
	if !(c.Sigma > 0) {
		return fmt.Errorf("dc: config: dechunk_sigma = %v, want > 0", c.Sigma)
	}
	if !(c.TargetN > 1) {
		return fmt.Errorf("dc: config: target_n = %v, want > 1", c.TargetN)
	}
	if c.RatioBatchSize < 0 {
		return fmt.Errorf("dc: config: ratio_batch_size = %d, want ≥ 0 (0: whole batch)", c.RatioBatchSize)
	}
	return nil
}

// ConvWidths lists (in, out) of the encoder's blocks then the decoder's:
// the encoder stays at E and its last block changes to D; the decoder's
// first block changes D to E and the rest stay at E (Isotropic's
// _compute_block_dims).
func (c *Config) ConvWidths() [][2]int {
	var w [][2]int
	for i := range c.EncoderBlocks {
		out := c.EncDecDim
		if i == c.EncoderBlocks-1 {
			out = c.ModelDim
		}
		w = append(w, [2]int{c.EncDecDim, out})
	}
	for i := range c.DecoderBlocks {
		in := c.EncDecDim
		if i == 0 {
			in = c.ModelDim
		}
		w = append(w, [2]int{in, c.EncDecDim})
	}
	return w
}

// Settings are the parts of a Config that the weights do not determine.
type Settings struct {
	Sigma           float64
	TargetN         float64
	RatioLossWeight float64
	RatioBatchSize  int
	NormGroups      int // 0: 32
	RouterGroups    int // 0: 8
}

var blockKey = regexp.MustCompile(`^hnet\.(encoder|decoder)\.layers\.(\d+)\.`)

// InferConfig derives the sizes of a reference DC-DiT scaffold from its
// tensor shapes (names as in the reference state_dict) and completes them
// with s. The grid is taken from pos_embed [1, L, D] when present and must
// be square there (DC-DiT is square-only); without it, grid must be given
// as rows, cols > 0.
func InferConfig(shapes map[string][]int, s Settings, rows, cols int) (*Config, error) {
	get := func(name string, rank int) ([]int, error) {
		sh, ok := shapes[name]
		if !ok {
			return nil, fmt.Errorf("dc: infer config: tensor %q missing", name)
		}
		if len(sh) != rank {
			return nil, fmt.Errorf("dc: infer config: tensor %q has shape %v, want rank %d", name, sh, rank)
		}
		return sh, nil
	}
	emb, err := get("x_embedder.proj.weight", 4)
	if err != nil {
		return nil, err
	}
	fin, err := get("final_layer.linear.weight", 2)
	if err != nil {
		return nil, err
	}
	res, err := get("hnet.residual_proj.weight", 2)
	if err != nil {
		return nil, err
	}
	rp, err := get("hnet.routing_module.proj.weight", 4)
	if err != nil {
		return nil, err
	}
	cp, err := get("hnet.encoder.layers.0.cond_proj.1.weight", 2)
	if err != nil {
		return nil, err
	}
	c := &Config{
		InChannels: emb[1], EncDecDim: emb[0], OutChannels: fin[0], ModelDim: res[0], RouterDim: rp[0], CondDim: cp[1],
		Sigma: s.Sigma, TargetN: s.TargetN, RatioLossWeight: s.RatioLossWeight, RatioBatchSize: s.RatioBatchSize,
		NormGroups: s.NormGroups, RouterGroups: s.RouterGroups, GridRows: rows, GridCols: cols,
	}
	if c.NormGroups == 0 {
		c.NormGroups = 32
	}
	if c.RouterGroups == 0 {
		c.RouterGroups = 8
	}
	for name := range shapes {
		m := blockKey.FindStringSubmatch(name)
		if m == nil {
			continue
		}
		i, _ := strconv.Atoi(m[2])
		if m[1] == "encoder" {
			c.EncoderBlocks = max(c.EncoderBlocks, i+1)
		} else {
			c.DecoderBlocks = max(c.DecoderBlocks, i+1)
		}
	}
	if pe, ok := shapes["pos_embed"]; ok && rows == 0 && cols == 0 {
		if len(pe) != 3 {
			return nil, fmt.Errorf("dc: infer config: pos_embed has shape %v, want [1, L, D]", pe)
		}
		side := 0
		for side*side < pe[1] {
			side++
		}
		if side*side != pe[1] {
			return nil, fmt.Errorf("dc: infer config: pos_embed has %d positions, not a square grid", pe[1])
		}
		c.GridRows, c.GridCols = side, side
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return c, nil
}
