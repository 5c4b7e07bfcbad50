package inception

import (
	"fmt"
	"sync"

	"github.com/dcdit/dcdit/kernels"
	"github.com/dcdit/dcdit/kernels/gemm"
)

// chunkImages is how many images go through the Mixed blocks together:
// enough rows for efficient GEMMs in the 8×8 blocks. The stem runs one
// image at a time: its 147×147 maps (5.5 MB per layer) already make long
// GEMMs, and they stay small.
const chunkImages = 8

// Net is the FID Inception v3 network with its BatchNorms folded. It is
// safe for concurrent use; calls share one set of buffers and run one at a
// time.
type Net struct {
	stem   [len(stemSpecs)]*conv
	blocks [len(blockSpecs)]*block
	fcW    []float32 // [NumClasses][FeatureDim]
	fcB    []float32
	chunk  int // images per pass through the Mixed blocks (tests cut batches finer)

	mu sync.Mutex
	ws workspace
}

// block is one Mixed block: its convolutions by branch name, and the 1×1
// convolutions that read the block's input fused into one GEMM.
type block struct {
	blockSpec
	convs map[string]*conv
	// in1x1 stacks the weights [in1x1N][cin] of the 1×1 convolutions
	// applied to the block input, in the order of in1x1Names; a 1×1
	// convolution after an average pool is among them, since both are
	// linear and commute.
	in1x1    []float32
	in1x1N   int
	in1x1Off map[string]int // first stacked channel of each
}

// in1x1Names lists the 1×1 convolutions of each variant that can run as
// one GEMM over the block input (Mixed_7c's pool branch follows a max pool
// and cannot).
func in1x1Names(k blockKind) []string {
	switch k {
	case kindA:
		return []string{"branch1x1", "branch5x5_1", "branch3x3dbl_1", "branch_pool"}
	case kindB:
		return []string{"branch3x3dbl_1"}
	case kindC:
		return []string{"branch1x1", "branch7x7_1", "branch7x7dbl_1", "branch_pool"}
	case kindD:
		return []string{"branch3x3_1", "branch7x7x3_1"}
	case kindE1:
		return []string{"branch1x1", "branch3x3_1", "branch3x3dbl_1", "branch_pool"}
	default:
		return []string{"branch1x1", "branch3x3_1", "branch3x3dbl_1"}
	}
}

// build assembles a Net from state-dict tensors whose names and shapes
// have been checked.
func build(params map[string][]float32) *Net {
	n := &Net{fcW: params["fc.weight"], fcB: params["fc.bias"], chunk: chunkImages}
	for i, s := range stemSpecs {
		n.stem[i] = fold(s, params)
	}
	for i, s := range blockSpecs {
		b := &block{blockSpec: s, convs: map[string]*conv{}, in1x1Off: map[string]int{}}
		for _, c := range s.convs() {
			b.convs[c.name[len(s.name)+1:]] = fold(c, params)
		}
		for _, name := range in1x1Names(s.kind) {
			c := b.convs[name]
			b.in1x1Off[name] = b.in1x1N
			b.in1x1 = append(b.in1x1, c.w...)
			b.in1x1N += c.cout
		}
		n.blocks[i] = b
	}
	return n
}

// Outputs selects what Run returns besides the pool3 features.
type Outputs struct {
	Resized bool // the network input: 299×299×3 after resize and 2x − 1
	Block1  bool // block 1's output (Mixed_5b's input), 35×35×192
	Mixed5d bool // Mixed_5d's output, 35×35×288
	Mixed6e bool // Mixed_6e's output (block 2's), 17×17×768
	Mixed7c bool // Mixed_7c's output before the average pool, 8×8×2048
	Pooled  bool // Features64, Features192 and Features768
	Logits  bool // Logits and LogitsNoBias
}

// Result holds a batch's outputs, image after image; maps are NHWC.
// Fields Outputs did not ask for are nil.
type Result struct {
	// Features are the 2048-d pool3 features, batch×2048 (pytorch-fid's
	// --dims 2048).
	Features []float32
	// Features64, Features192 and Features768 are blocks 0, 1 and 2's
	// outputs averaged over the image (--dims 64, 192, 768).
	Features64, Features192, Features768 []float32
	// Logits are fc(features), batch×1008; LogitsNoBias omit the head's
	// bias, as the ADM evaluator's Inception Score does.
	Logits, LogitsNoBias []float32
	// Intermediate activations, batch×H×W×C (see Outputs).
	Resized, Block1, Mixed5d, Mixed6e, Mixed7c []float32
}

// Features returns the pool3 features (batch×2048) of batch h×w RGB images
// given as float32 NHWC values in [0, 1].
func (n *Net) Features(imgs []float32, batch, h, w int) ([]float32, error) {
	r, err := n.Run(imgs, batch, h, w, Outputs{})
	if err != nil {
		return nil, err
	}
	return r.Features, nil
}

// FeaturesUint8 is Features for uint8 NHWC RGB images, read as
// torchvision's ToTensor does (u/255 in float32), as sample batches are
// stored.
func (n *Net) FeaturesUint8(imgs []uint8, batch, h, w int) ([]float32, error) {
	r, err := n.RunUint8(imgs, batch, h, w, Outputs{})
	if err != nil {
		return nil, err
	}
	return r.Features, nil
}

// Run evaluates the network on batch h×w RGB images given as float32 NHWC
// values in [0, 1] and returns the features and the outputs want selects.
func (n *Net) Run(imgs []float32, batch, h, w int, want Outputs) (*Result, error) {
	if err := checkInput(len(imgs), batch, h, w); err != nil {
		return nil, err
	}
	return n.run(imgs, nil, batch, h, w, want), nil
}

// RunUint8 is Run for uint8 NHWC RGB images (see FeaturesUint8).
func (n *Net) RunUint8(imgs []uint8, batch, h, w int, want Outputs) (*Result, error) {
	if err := checkInput(len(imgs), batch, h, w); err != nil {
		return nil, err
	}
	return n.run(nil, imgs, batch, h, w, want), nil
}

func checkInput(have, batch, h, w int) error {
	if batch < 1 || h < 1 || w < 1 {
		return fmt.Errorf("inception: batch %d of %d×%d images, want at least one image of at least 1×1", batch, h, w)
	}
	if want := batch * h * w * 3; have != want {
		return fmt.Errorf("inception: %d input values, want %d for %d images of %d×%d×3 (NHWC)", have, want, batch, h, w)
	}
	return nil
}

// Spatial sizes along the network for a 299×299 input.
const (
	size1a   = (InputSize-3)/2 + 1 // 149
	size2a   = size1a - 2          // 147
	sizeP1   = (size2a-3)/2 + 1    // 73
	size4a   = sizeP1 - 2          // 71
	sizeP2   = (size4a-3)/2 + 1    // 35
	size6    = (sizeP2-3)/2 + 1    // 17
	size7    = (size6-3)/2 + 1     // 8
	pixelsIn = InputSize * InputSize * 3
	// block1Len is the length of one image's block-1 output.
	block1Len = sizeP2 * sizeP2 * 192
)

// run evaluates the network on f32 or u8 images, n.chunk at a time.
func (n *Net) run(f32 []float32, u8 []uint8, batch, h, w int, want Outputs) *Result {
	n.mu.Lock()
	defer n.mu.Unlock()
	res := &Result{Features: make([]float32, batch*FeatureDim)}
	alloc := func(on bool, per int) []float32 {
		if !on {
			return nil
		}
		return make([]float32, batch*per)
	}
	res.Resized = alloc(want.Resized, pixelsIn)
	res.Block1 = alloc(want.Block1, block1Len)
	res.Mixed5d = alloc(want.Mixed5d, sizeP2*sizeP2*blockSpecs[2].outChannels())
	res.Mixed6e = alloc(want.Mixed6e, size6*size6*outC)
	res.Mixed7c = alloc(want.Mixed7c, size7*size7*outE)
	res.Features64 = alloc(want.Pooled, 64)
	res.Features192 = alloc(want.Pooled, 192)
	res.Features768 = alloc(want.Pooled, outC)

	rs := newResizer(h, w)
	per := h * w * 3
	for b0 := 0; b0 < batch; b0 += n.chunk {
		nb := min(n.chunk, batch-b0)
		cur := n.ws.get(bufA, nb*block1Len)
		x := n.ws.get(bufX, pixelsIn)
		tmp := n.ws.get(bufResize, rs.tmpLen())
		for i := range nb {
			img := b0 + i
			if f32 != nil {
				rs.image(x, f32[img*per:(img+1)*per], nil, tmp)
			} else {
				rs.image(x, nil, u8[img*per:(img+1)*per], tmp)
			}
			n.stemForward(x, img, cur[i*block1Len:(i+1)*block1Len], res)
		}
		n.blocksForward(cur, nb, b0, res)
	}
	if want.Logits {
		res.LogitsNoBias = make([]float32, batch*NumClasses)
		gemm.Gemm(false, true, batch, NumClasses, FeatureDim, 1, res.Features, FeatureDim, n.fcW, FeatureDim, 0, res.LogitsNoBias, NumClasses)
		res.Logits = make([]float32, batch*NumClasses)
		kernels.AddRowVector(res.Logits, res.LogitsNoBias, n.fcB, NumClasses)
	}
	return res
}

// keep copies a chunk's activation into a requested output at image b0.
func keep(dst, src []float32, b0, per int) {
	if dst != nil {
		copy(dst[b0*per:], src)
	}
}

// stemForward runs blocks 0 and 1 on the resized image x, writes block
// 1's output to out and stores the requested outputs in res as image img.
func (n *Net) stemForward(x []float32, img int, out []float32, res *Result) {
	keep(res.Resized, x, img, pixelsIn)
	s := n.stem
	a := n.ws.get(bufS1, size1a*size1a*32)
	n.conv(s[0], x, 1, InputSize, InputSize, a, 32, 0)
	b := n.ws.get(bufS2, size2a*size2a*32)
	n.conv(s[1], a, 1, size1a, size1a, b, 32, 0)
	// Bias and ReLU run after the max pool, on the 4× smaller map.
	raw := n.ws.get(bufS1, size2a*size2a*64)
	n.convRaw(s[2], b, 1, size2a, size2a, raw)
	p := n.ws.get(bufS2, sizeP1*sizeP1*64)
	maxPoolTo(p, 64, 0, raw, 64, 1, size2a, size2a, s[2].b)
	if res.Features64 != nil {
		kernels.GlobalAvgPool(res.Features64[img*64:], p, 1, sizeP1, sizeP1, 64)
	}
	c := n.ws.get(bufS1, sizeP1*sizeP1*80)
	n.conv(s[3], p, 1, sizeP1, sizeP1, c, 80, 0)
	raw = n.ws.get(bufS2, size4a*size4a*192)
	n.convRaw(s[4], c, 1, sizeP1, sizeP1, raw)
	maxPoolTo(out, 192, 0, raw, 192, 1, size4a, size4a, s[4].b)
	keep(res.Block1, out, img, block1Len)
	if res.Features192 != nil {
		kernels.GlobalAvgPool(res.Features192[img*192:], out, 1, sizeP2, sizeP2, 192)
	}
}

// blocksForward runs the Mixed blocks on nb block-1 outputs cur (in
// buffer bufA) and stores their outputs in res at image b0.
func (n *Net) blocksForward(cur []float32, nb, b0 int, res *Result) {
	x, side := cur, sizeP2
	out, next := bufB, bufA
	for _, blk := range n.blocks {
		y, outSide := n.block(blk, x, nb, side, out)
		x, side = y, outSide
		switch blk.name {
		case "Mixed_5d":
			keep(res.Mixed5d, y, b0, side*side*blk.outChannels())
		case "Mixed_6e":
			keep(res.Mixed6e, y, b0, side*side*outC)
			if res.Features768 != nil {
				kernels.GlobalAvgPool(res.Features768[b0*outC:], y, nb, side, side, outC)
			}
		case "Mixed_7c":
			keep(res.Mixed7c, y, b0, side*side*outE)
			kernels.GlobalAvgPool(res.Features[b0*FeatureDim:], y, nb, side, side, outE)
		}
		out, next = next, out
	}
}

// block runs one Mixed block on x (nb images of side×side×cin) into the
// workspace buffer out and returns the output and its side.
func (n *Net) block(blk *block, x []float32, nb, side int, out bufID) ([]float32, int) {
	cv := blk.convs
	P := nb * side * side
	cout := blk.outChannels()
	// The stacked 1×1 convolutions over the block input.
	nIn := blk.in1x1N
	pw := n.ws.get(bufPW, P*nIn)
	gemm.Gemm(false, true, P, nIn, blk.cin, 1, x, blk.cin, blk.in1x1, blk.cin, 0, pw, nIn)
	seg := func(name string, dst []float32, ld, off int) segment {
		return segment{src: blk.in1x1Off[name], bias: cv[name].b, dst: dst, ld: ld, off: off}
	}
	switch blk.kind {
	case kindA:
		y := n.ws.get(out, P*cout)
		t1 := n.ws.get(bufT1, P*48)
		t2 := n.ws.get(bufT2, P*64)
		biasReLU(pw, nIn, P, seg("branch1x1", y, cout, 0), seg("branch5x5_1", t1, 48, 0), seg("branch3x3dbl_1", t2, 64, 0))
		avgPoolBiasReLU(pw, nIn, nb, side, seg("branch_pool", y, cout, outA))
		n.conv(cv["branch5x5_2"], t1, nb, side, side, y, cout, 64)
		t3 := n.ws.get(bufT3, P*96)
		n.conv(cv["branch3x3dbl_2"], t2, nb, side, side, t3, 96, 0)
		n.conv(cv["branch3x3dbl_3"], t3, nb, side, side, y, cout, 128)
		return y, side
	case kindB:
		o := (side-3)/2 + 1
		Q := nb * o * o
		y := n.ws.get(out, Q*cout)
		n.conv(cv["branch3x3"], x, nb, side, side, y, cout, 0)
		t1 := n.ws.get(bufT1, P*64)
		biasReLU(pw, nIn, P, seg("branch3x3dbl_1", t1, 64, 0))
		t2 := n.ws.get(bufT2, P*96)
		n.conv(cv["branch3x3dbl_2"], t1, nb, side, side, t2, 96, 0)
		n.conv(cv["branch3x3dbl_3"], t2, nb, side, side, y, cout, 384)
		maxPoolTo(y, cout, 480, x, blk.cin, nb, side, side, nil)
		return y, o
	case kindC:
		c7 := blk.width
		y := n.ws.get(out, P*cout)
		t1 := n.ws.get(bufT1, P*c7)
		t2 := n.ws.get(bufT2, P*c7)
		biasReLU(pw, nIn, P, seg("branch1x1", y, cout, 0), seg("branch7x7_1", t1, c7, 0), seg("branch7x7dbl_1", t2, c7, 0))
		avgPoolBiasReLU(pw, nIn, nb, side, seg("branch_pool", y, cout, 3*c7Out))
		t3 := n.ws.get(bufT3, P*c7)
		n.conv(cv["branch7x7_2"], t1, nb, side, side, t3, c7, 0)
		n.conv(cv["branch7x7_3"], t3, nb, side, side, y, cout, c7Out)
		n.conv(cv["branch7x7dbl_2"], t2, nb, side, side, t1, c7, 0)
		n.conv(cv["branch7x7dbl_3"], t1, nb, side, side, t2, c7, 0)
		n.conv(cv["branch7x7dbl_4"], t2, nb, side, side, t1, c7, 0)
		n.conv(cv["branch7x7dbl_5"], t1, nb, side, side, y, cout, 2*c7Out)
		return y, side
	case kindD:
		o := (side-3)/2 + 1
		Q := nb * o * o
		y := n.ws.get(out, Q*cout)
		t1 := n.ws.get(bufT1, P*192)
		t2 := n.ws.get(bufT2, P*192)
		biasReLU(pw, nIn, P, seg("branch3x3_1", t1, 192, 0), seg("branch7x7x3_1", t2, 192, 0))
		n.conv(cv["branch3x3_2"], t1, nb, side, side, y, cout, 0)
		n.conv(cv["branch7x7x3_2"], t2, nb, side, side, t1, 192, 0)
		n.conv(cv["branch7x7x3_3"], t1, nb, side, side, t2, 192, 0)
		n.conv(cv["branch7x7x3_4"], t2, nb, side, side, y, cout, 320)
		maxPoolTo(y, cout, 512, x, blk.cin, nb, side, side, nil)
		return y, o
	default:
		y := n.ws.get(out, P*cout)
		t1 := n.ws.get(bufT1, P*384)
		t2 := n.ws.get(bufT2, P*448)
		biasReLU(pw, nIn, P, seg("branch1x1", y, cout, 0), seg("branch3x3_1", t1, 384, 0), seg("branch3x3dbl_1", t2, 448, 0))
		n.conv(cv["branch3x3_2a"], t1, nb, side, side, y, cout, 320)
		n.conv(cv["branch3x3_2b"], t1, nb, side, side, y, cout, 704)
		t3 := n.ws.get(bufT3, P*384)
		n.conv(cv["branch3x3dbl_2"], t2, nb, side, side, t3, 384, 0)
		n.conv(cv["branch3x3dbl_3a"], t3, nb, side, side, y, cout, 1088)
		n.conv(cv["branch3x3dbl_3b"], t3, nb, side, side, y, cout, 1472)
		const poolOff = 1856
		if blk.kind == kindE1 {
			avgPoolBiasReLU(pw, nIn, nb, side, seg("branch_pool", y, cout, poolOff))
			return y, side
		}
		// Mixed_7c pools with a max pool, which does not commute with
		// the convolution.
		pooled := n.ws.get(bufT2, P*blk.cin)
		kernels.MaxPool2D(pooled, x, nb, side, side, blk.cin, 3, 1, 1)
		n.conv(cv["branch_pool"], pooled, nb, side, side, y, cout, poolOff)
		return y, side
	}
}

// conv runs c on x (nb images of h×w×cin) and writes ReLU(conv + bias)
// into channels [off, off+cout) of dst, whose rows hold ld channels.
func (n *Net) conv(c *conv, x []float32, nb, h, w int, dst []float32, ld, off int) {
	p := c.params(nb, h, w)
	pixels := nb * p.OutH() * p.OutW()
	if ld == c.cout && off == 0 {
		n.convRaw(c, x, nb, h, w, dst)
		biasReLU(dst, ld, pixels, segment{bias: c.b, dst: dst, ld: ld})
		return
	}
	raw := n.ws.get(bufRaw, pixels*c.cout)
	n.convRaw(c, x, nb, h, w, raw)
	biasReLU(raw, c.cout, pixels, segment{bias: c.b, dst: dst, ld: ld, off: off})
}

// convRaw runs c's convolution without bias or ReLU into y.
func (n *Net) convRaw(c *conv, x []float32, nb, h, w int, y []float32) {
	p := c.params(nb, h, w)
	kernels.Conv2DForward(y, x, c.w, nil, p, n.ws.get(bufConv, kernels.Conv2DScratch(p)))
}

// params describes c applied to nb images of h×w.
func (c *conv) params(nb, h, w int) kernels.Conv2D {
	return kernels.Conv2D{Batch: nb, H: h, W: w, Cin: c.cin, Cout: c.cout, KH: c.kh, KW: c.kw,
		StrideH: c.stride, StrideW: c.stride, PadTop: c.padH, PadBottom: c.padH, PadLeft: c.padW, PadRight: c.padW}
}

// bufID names one of the workspace's buffers.
type bufID int

const (
	bufX      bufID = iota // one resized image
	bufResize              // its resize scratch
	bufS1                  // stem activations, alternating with bufS2
	bufS2
	bufA // Mixed block activations, alternating with bufB
	bufB
	bufPW   // stacked 1×1 convolutions of a block
	bufT1   // branch intermediates
	bufT2   //
	bufT3   //
	bufRaw  // a convolution's output before bias and ReLU
	bufConv // convolution scratch
	numBufs
)

// workspace holds a Net's buffers, grown on demand and kept across calls.
type workspace struct{ bufs [numBufs][]float32 }

// get returns buffer id with room for n values; its contents are
// undefined.
func (w *workspace) get(id bufID, n int) []float32 {
	if cap(w.bufs[id]) < n {
		w.bufs[id] = make([]float32, n)
	}
	return w.bufs[id][:n]
}
