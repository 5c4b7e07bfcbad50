package bench

import (
	"fmt"
	"math/rand/v2"

	"github.com/dcdit/dcdit/kernels"
	"github.com/dcdit/dcdit/kernels/gemm"
	"github.com/dcdit/dcdit/optim"
)

// A benchCase is one workload of the suite. Its name is the name
// torch_reference.py gives the same workload, so the two outputs compare
// line by line; setup allocates and fills the inputs outside the timing.
type benchCase struct {
	name  string
	setup func() workload
	// reps, when set, overrides the number of timed repetitions, as the
	// reference does for its slowest cases.
	reps func(base int) int
}

// workload is a prepared case: run is what is timed. flops (per run) gives
// a GFLOP/s figure when positive; params gives nanoseconds per parameter.
// reset, when set, runs before every run, untimed, to restore state a run
// changes (a training step's weights, on which a DC model's routing and so
// its work depend).
type workload struct {
	run    func()
	reset  func()
	flops  float64
	params int
}

// Shapes of torch_reference.py's workloads (DiT-S: width 384, 6 heads of 64;
// batch 8 of 16×16 tokens; the DC-DiT-S encoder's 96-channel convolutions
// on the 32×32 latent grid).
const (
	attnSeqs, attnLen, attnHeads, attnHeadDim = 8, 256, 6, 64
	convBatch, convSide, convChannels         = 8, 32, 96
	adamwParams                               = 33_000_000
)

// allCases is the suite in the reference's order, with the DC-DiT-S cases
// (shared/bench/README.md's; the reference script has none) after the DiT-S/2 ones; the
// whole-model cases run max(2, base/2) times, as in the reference.
func allCases() []benchCase {
	return append([]benchCase{
		gemmCase(2048, 384, 1152),
		gemmCase(2048, 384, 1536),
		gemmCase(2048, 1536, 384),
		gemmCase(256, 1152, 1152),
		gemmCase(1024, 1024, 1024),
		{name: "attention_fwd_bwd", setup: attentionCase},
		{name: "conv3x3_fwd_bwd", setup: convCase},
		{name: "dit_s_block_fwd", setup: blockCase(false)},
		{name: "dit_s_block_fwd_bwd", setup: blockCase(true)},
		{name: "dit_s2_train_step", setup: trainStepCase, reps: halfReps},
		{name: "dit_s2_forward", setup: forwardCase, reps: halfReps},
	}, append(dcCases(),
		benchCase{name: "adamw", setup: adamwCase, reps: func(int) int { return 3 }},
	)...)
}

func halfReps(base int) int { return max(2, base/2) }

// gemmCase times C = A·B with A m×k and B k×n, the reference's a @ b.
func gemmCase(m, k, n int) benchCase {
	return benchCase{
		name: fmt.Sprintf("gemm_%dx%dx%d", m, k, n),
		setup: func() workload {
			a, b, c := randn(1, m*k), randn(2, k*n), make([]float32, m*n)
			return workload{
				run:   func() { gemm.Gemm(false, false, m, n, k, 1, a, k, b, n, 0, c, n) },
				flops: 2 * float64(m) * float64(k) * float64(n),
			}
		},
	}
}

// attentionCase times softmax(q·kᵀ/8)·v forward and backward over 8
// sequences of 256 tokens with 6 heads of 64, the gradient of a sum (dout
// all ones), as the reference's attn_step.
func attentionCase() workload {
	n, hd := attnSeqs*attnLen, attnHeads*attnHeadDim
	offsets := make([]int, attnSeqs+1)
	for s := range offsets {
		offsets[s] = s * attnLen
	}
	qkv, dqkv := randn(3, n*3*hd), make([]float32, n*3*hd)
	out, lse, dout := make([]float32, n*hd), make([]float32, n*attnHeads), ones(n*hd)
	ws := make([]float32, kernels.AttentionScratch(offsets, attnHeads, attnHeadDim))
	const scale = 0.125
	// q·kᵀ and p·v forward (4·L²·d per head), and dv, dp, dq, dk backward
	// (8·L²·d).
	flops := 12 * float64(attnSeqs*attnHeads) * attnLen * attnLen * attnHeadDim
	// As ops.Attention runs it in training: these sequences are short
	// enough for the forward pass to keep the probabilities.
	probs := make([]float32, kernels.AttentionProbs(offsets, attnHeads, attnHeadDim))
	return workload{
		run: func() {
			if len(probs) == 0 {
				kernels.AttentionForward(out, lse, qkv, offsets, attnHeads, attnHeadDim, scale, ws)
				kernels.AttentionBackward(dqkv, dout, out, lse, qkv, offsets, attnHeads, attnHeadDim, scale, ws)
				return
			}
			kernels.AttentionForwardKeep(out, lse, probs, qkv, offsets, attnHeads, attnHeadDim, scale, ws)
			kernels.AttentionBackwardKept(dqkv, dout, out, probs, qkv, offsets, attnHeads, attnHeadDim, scale, ws)
		},
		flops: flops,
	}
}

// convCase times a 96→96 3×3 convolution with bias over a batch of 8 32×32
// grids, forward and backward to dx, dw and dbias for dy all ones, as the
// reference's conv(xi).sum().backward().
func convCase() workload {
	const b, h, w, c = convBatch, convSide, convSide, convChannels
	tokens := b * h * w
	x, wt, bias := randn(4, tokens*c), randn(5, c*c*9), randn(6, c)
	y, dy := make([]float32, tokens*c), ones(tokens*c)
	dx, dw, dbias := make([]float32, tokens*c), make([]float32, c*c*9), make([]float32, c)
	ws := make([]float32, kernels.Conv3x3Scratch(b, h, w, c, c))
	return workload{
		run: func() {
			kernels.Conv3x3Forward(y, x, wt, bias, b, h, w, c, c, ws)
			kernels.Conv3x3Backward(dx, dw, dbias, dy, x, wt, b, h, w, c, c, ws)
		},
		// Forward, dx and dw are each 2·9·cin·cout per token.
		flops: 3 * 2 * 9 * float64(tokens) * c * c,
	}
}

// adamwCase times one AdamW step over 33 M parameters with PyTorch's
// defaults, as the reference times torch.optim.AdamW(params, lr=1e-4).step.
func adamwCase() workload {
	p, g := randn(7, adamwParams), randn(8, adamwParams)
	h := optim.DefaultHyper()
	h.LR = 1e-4
	o, err := optim.NewAdamW(optim.AllTrainable(adamwParams), h)
	if err != nil {
		panic(err) // fixed, valid hyperparameters
	}
	return workload{run: func() { o.Step(p, g) }, params: adamwParams}
}

// randn returns n standard normal values drawn from seed, so every run
// times the same numbers.
func randn(seed uint64, n int) []float32 {
	r := rand.New(rand.NewPCG(seed, 0x5eed))
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64())
	}
	return x
}

func ones(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = 1
	}
	return x
}
