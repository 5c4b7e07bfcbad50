package inception

// The network's fixed dimensions.
const (
	// InputSize is the side of the square image the network sees.
	InputSize = 299
	// FeatureDim is the length of the pool3 feature vector FID uses.
	FeatureDim = 2048
	// NumClasses is the width of the classifier head (the TensorFlow
	// model's 1008 classes).
	NumClasses = 1008

	// bnEps is the BatchNorm epsilon of every BasicConv2d (TensorFlow's,
	// not PyTorch's default 1e-5).
	bnEps = 0.001
)

// convSpec is one BasicConv2d (bias-free convolution, BatchNorm, ReLU):
// its state-dict prefix, channels, kernel (rows × columns), stride and
// symmetric padding (rows, columns).
type convSpec struct {
	name       string
	cin, cout  int
	kh, kw     int
	stride     int
	padH, padW int
}

// blockKind names the five Inception module variants pytorch-fid uses.
type blockKind int

const (
	kindA  blockKind = iota // FIDInceptionA: Mixed_5b–5d
	kindB                   // torchvision InceptionB: Mixed_6a
	kindC                   // FIDInceptionC: Mixed_6b–6e
	kindD                   // torchvision InceptionD: Mixed_7a
	kindE1                  // FIDInceptionE_1: Mixed_7b (average-pool branch)
	kindE2                  // FIDInceptionE_2: Mixed_7c (max-pool branch)
)

// blockSpec is one Mixed block: its name, variant, input channels and the
// variant's width parameter (pool_features for A, channels_7x7 for C).
type blockSpec struct {
	name  string
	kind  blockKind
	cin   int
	width int
}

// stemSpecs are blocks 0 and 1 before the Mixed blocks; a 3×3 stride-2 max
// pool follows Conv2d_2b_3x3 and Conv2d_4a_3x3.
var stemSpecs = [...]convSpec{
	{"Conv2d_1a_3x3", 3, 32, 3, 3, 2, 0, 0},
	{"Conv2d_2a_3x3", 32, 32, 3, 3, 1, 0, 0},
	{"Conv2d_2b_3x3", 32, 64, 3, 3, 1, 1, 1},
	{"Conv2d_3b_1x1", 64, 80, 1, 1, 1, 0, 0},
	{"Conv2d_4a_3x3", 80, 192, 3, 3, 1, 0, 0},
}

// blockSpecs are the Mixed blocks in order.
var blockSpecs = [...]blockSpec{
	{"Mixed_5b", kindA, 192, 32},
	{"Mixed_5c", kindA, 256, 64},
	{"Mixed_5d", kindA, 288, 64},
	{"Mixed_6a", kindB, 288, 0},
	{"Mixed_6b", kindC, 768, 128},
	{"Mixed_6c", kindC, 768, 160},
	{"Mixed_6d", kindC, 768, 160},
	{"Mixed_6e", kindC, 768, 192},
	{"Mixed_7a", kindD, 768, 0},
	{"Mixed_7b", kindE1, 1280, 0},
	{"Mixed_7c", kindE2, 2048, 0},
}

// Output channels of the Mixed block variants (pool_features adds to
// A's), and of each branch of a FIDInceptionC.
const (
	outA  = 224
	outB  = 768
	outC  = 768
	outD  = 1280
	outE  = 2048
	c7Out = 192
)

// outChannels is the number of channels block b produces.
func (b blockSpec) outChannels() int {
	switch b.kind {
	case kindA:
		return outA + b.width
	case kindB:
		return outB
	case kindC:
		return outC
	case kindD:
		return outD
	default:
		return outE
	}
}

// convs lists the block's BasicConv2d modules.
func (b blockSpec) convs() []convSpec {
	p := b.name + "."
	one := func(name string, cin, cout int) convSpec { return convSpec{p + name, cin, cout, 1, 1, 1, 0, 0} }
	sq := func(name string, cin, cout, k, stride, pad int) convSpec {
		return convSpec{p + name, cin, cout, k, k, stride, pad, pad}
	}
	row := func(name string, cin, cout, k int) convSpec { return convSpec{p + name, cin, cout, 1, k, 1, 0, k / 2} }
	col := func(name string, cin, cout, k int) convSpec { return convSpec{p + name, cin, cout, k, 1, 1, k / 2, 0} }
	switch b.kind {
	case kindA:
		return []convSpec{
			one("branch1x1", b.cin, 64),
			one("branch5x5_1", b.cin, 48),
			sq("branch5x5_2", 48, 64, 5, 1, 2),
			one("branch3x3dbl_1", b.cin, 64),
			sq("branch3x3dbl_2", 64, 96, 3, 1, 1),
			sq("branch3x3dbl_3", 96, 96, 3, 1, 1),
			one("branch_pool", b.cin, b.width),
		}
	case kindB:
		return []convSpec{
			sq("branch3x3", b.cin, 384, 3, 2, 0),
			one("branch3x3dbl_1", b.cin, 64),
			sq("branch3x3dbl_2", 64, 96, 3, 1, 1),
			sq("branch3x3dbl_3", 96, 96, 3, 2, 0),
		}
	case kindC:
		c7 := b.width
		return []convSpec{
			one("branch1x1", b.cin, c7Out),
			one("branch7x7_1", b.cin, c7),
			row("branch7x7_2", c7, c7, 7),
			col("branch7x7_3", c7, c7Out, 7),
			one("branch7x7dbl_1", b.cin, c7),
			col("branch7x7dbl_2", c7, c7, 7),
			row("branch7x7dbl_3", c7, c7, 7),
			col("branch7x7dbl_4", c7, c7, 7),
			row("branch7x7dbl_5", c7, c7Out, 7),
			one("branch_pool", b.cin, c7Out),
		}
	case kindD:
		return []convSpec{
			one("branch3x3_1", b.cin, 192),
			sq("branch3x3_2", 192, 320, 3, 2, 0),
			one("branch7x7x3_1", b.cin, 192),
			row("branch7x7x3_2", 192, 192, 7),
			col("branch7x7x3_3", 192, 192, 7),
			sq("branch7x7x3_4", 192, 192, 3, 2, 0),
		}
	default:
		return []convSpec{
			one("branch1x1", b.cin, 320),
			one("branch3x3_1", b.cin, 384),
			row("branch3x3_2a", 384, 384, 3),
			col("branch3x3_2b", 384, 384, 3),
			one("branch3x3dbl_1", b.cin, 448),
			sq("branch3x3dbl_2", 448, 384, 3, 1, 1),
			row("branch3x3dbl_3a", 384, 384, 3),
			col("branch3x3dbl_3b", 384, 384, 3),
			one("branch_pool", b.cin, 192),
		}
	}
}

// allConvs lists the network's 94 BasicConv2d modules in forward order.
func allConvs() []convSpec {
	out := append([]convSpec(nil), stemSpecs[:]...)
	for _, b := range blockSpecs {
		out = append(out, b.convs()...)
	}
	return out
}

// tensorShape is one tensor the checkpoint must hold.
type tensorShape struct {
	name  string
	shape []int64
}

// expectedTensors lists every float tensor of the state dict with its
// shape: per BasicConv2d the convolution weight and the four BatchNorm
// vectors, then the classifier head.
func expectedTensors() []tensorShape {
	var out []tensorShape
	for _, c := range allConvs() {
		n := int64(c.cout)
		out = append(out,
			tensorShape{c.name + ".conv.weight", []int64{n, int64(c.cin), int64(c.kh), int64(c.kw)}},
			tensorShape{c.name + ".bn.weight", []int64{n}},
			tensorShape{c.name + ".bn.bias", []int64{n}},
			tensorShape{c.name + ".bn.running_mean", []int64{n}},
			tensorShape{c.name + ".bn.running_var", []int64{n}},
		)
	}
	return append(out,
		tensorShape{"fc.weight", []int64{NumClasses, FeatureDim}},
		tensorShape{"fc.bias", []int64{NumClasses}},
	)
}
