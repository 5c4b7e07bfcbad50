package vae

import (
	"fmt"
	"sort"
)

// Model is a loaded AutoencoderKL: its configuration and float32 weights.
// Encode and Decode only read it, so one Model serves concurrent calls.
type Model struct {
	Config Config
	// Source says where the weights came from: the file and its naming.
	Source string

	enc              encoder
	dec              decoder
	quant, postQuant *conv
}

// conv is a convolution's weights [cout, cin, k, k] (PyTorch order) and
// bias [cout].
type conv struct {
	w, b            []float32
	cin, cout, size int
}

// norm is a GroupNorm's affine weight and bias.
type norm struct{ w, b []float32 }

// resnet is diffusers' ResnetBlock2D without time embedding; shortcut is
// the 1×1 conv present when the block changes width.
type resnet struct {
	norm1, norm2 norm
	conv1, conv2 conv
	shortcut     *conv
}

// attention is the mid block's single-head self-attention: qkv holds the
// to_q, to_k and to_v Linear weights stacked [3C, C] (and their biases),
// the [q | k | v] layout kernels.AttentionForward reads.
type attention struct {
	norm       norm
	qkvW, qkvB []float32
	outW, outB []float32
	c          int
}

// midBlock is UNetMidBlock2D: resnet, optional attention, resnet.
type midBlock struct {
	res  [2]resnet
	attn *attention
}

// stage is one down (or up) block: its resnets, then the optional
// stride-2 (or upsampling) conv.
type stage struct {
	resnets []resnet
	sampler *conv
}

type encoder struct {
	convIn  conv
	blocks  []stage
	mid     midBlock
	normOut norm
	convOut conv
}

type decoder struct {
	convIn  conv
	mid     midBlock
	blocks  []stage
	normOut norm
	convOut conv
}

// builder walks the architecture of a configuration in diffusers'
// state-dict naming. Every parameter goes through param, which records
// its name and shape (ExpectedTensors) and, when load is set, fetches its
// values: the architecture is written once for both.
type builder struct {
	specs []TensorSpec
	load  func(name string, n int) ([]float32, error)
	err   error
}

func (b *builder) param(name string, shape ...int) []float32 {
	s := make([]int64, len(shape))
	n := 1
	for i, d := range shape {
		s[i] = int64(d)
		n *= d
	}
	b.specs = append(b.specs, TensorSpec{Name: name, Shape: s})
	if b.load == nil || b.err != nil {
		return nil
	}
	v, err := b.load(name, n)
	if err != nil {
		b.err = err
	}
	return v
}

func (b *builder) conv(name string, cin, cout, size int) conv {
	return conv{w: b.param(name+".weight", cout, cin, size, size), b: b.param(name+".bias", cout), cin: cin, cout: cout, size: size}
}

func (b *builder) norm(name string, c int) norm {
	return norm{w: b.param(name+".weight", c), b: b.param(name+".bias", c)}
}

func (b *builder) resnet(name string, cin, cout int) resnet {
	r := resnet{norm1: b.norm(name+".norm1", cin), conv1: b.conv(name+".conv1", cin, cout, 3),
		norm2: b.norm(name+".norm2", cout), conv2: b.conv(name+".conv2", cout, cout, 3)}
	if cin != cout {
		s := b.conv(name+".conv_shortcut", cin, cout, 1)
		r.shortcut = &s
	}
	return r
}

func (b *builder) mid(name string, c int, attn bool) midBlock {
	m := midBlock{res: [2]resnet{b.resnet(name+".resnets.0", c, c)}}
	if attn {
		a := &attention{norm: b.norm(name+".attentions.0.group_norm", c), c: c}
		var qkv [3][]float32
		var bias [3][]float32
		for i, p := range []string{"to_q", "to_k", "to_v"} {
			qkv[i] = b.param(name+".attentions.0."+p+".weight", c, c)
			bias[i] = b.param(name+".attentions.0."+p+".bias", c)
		}
		a.outW = b.param(name+".attentions.0.to_out.0.weight", c, c)
		a.outB = b.param(name+".attentions.0.to_out.0.bias", c)
		if b.load != nil && b.err == nil {
			a.qkvW = concat(qkv[:]...)
			a.qkvB = concat(bias[:]...)
		}
		m.attn = a
	}
	m.res[1] = b.resnet(name+".resnets.1", c, c)
	return m
}

func concat(parts ...[]float32) []float32 {
	n := 0
	for _, p := range parts {
		n += len(p)
	}
	out := make([]float32, 0, n)
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

// build walks cfg's architecture: the encoder, the decoder, then the quant
// convs, in diffusers' names.
func (b *builder) build(cfg *Config) *Model {
	m := &Model{Config: *cfg}
	ch := cfg.BlockOutChannels
	n := len(ch)
	top := ch[n-1]

	e := &m.enc
	e.convIn = b.conv("encoder.conv_in", cfg.InChannels, ch[0], 3)
	prev := ch[0]
	for i, c := range ch {
		var s stage
		for j := range cfg.LayersPerBlock {
			s.resnets = append(s.resnets, b.resnet(fmt.Sprintf("encoder.down_blocks.%d.resnets.%d", i, j), prev, c))
			prev = c
		}
		if i < n-1 {
			d := b.conv(fmt.Sprintf("encoder.down_blocks.%d.downsamplers.0.conv", i), c, c, 3)
			s.sampler = &d
		}
		e.blocks = append(e.blocks, s)
	}
	e.mid = b.mid("encoder.mid_block", top, cfg.MidBlockAddAttention)
	e.normOut = b.norm("encoder.conv_norm_out", top)
	e.convOut = b.conv("encoder.conv_out", top, 2*cfg.LatentChannels, 3)

	d := &m.dec
	d.convIn = b.conv("decoder.conv_in", cfg.LatentChannels, top, 3)
	d.mid = b.mid("decoder.mid_block", top, cfg.MidBlockAddAttention)
	prev = top
	for i := range n {
		c := ch[n-1-i]
		var s stage
		for j := range cfg.LayersPerBlock + 1 {
			s.resnets = append(s.resnets, b.resnet(fmt.Sprintf("decoder.up_blocks.%d.resnets.%d", i, j), prev, c))
			prev = c
		}
		if i < n-1 {
			u := b.conv(fmt.Sprintf("decoder.up_blocks.%d.upsamplers.0.conv", i), c, c, 3)
			s.sampler = &u
		}
		d.blocks = append(d.blocks, s)
	}
	d.normOut = b.norm("decoder.conv_norm_out", ch[0])
	d.convOut = b.conv("decoder.conv_out", ch[0], cfg.OutChannels, 3)

	if cfg.UseQuantConv {
		q := b.conv("quant_conv", 2*cfg.LatentChannels, 2*cfg.LatentChannels, 1)
		m.quant = &q
	}
	if cfg.UsePostQuantConv {
		q := b.conv("post_quant_conv", cfg.LatentChannels, cfg.LatentChannels, 1)
		m.postQuant = &q
	}
	return m
}

// ExpectedTensors lists the tensors of an AutoencoderKL of configuration
// cfg, in the diffusers naming (the attention projections as Linear
// weights [C, C]), sorted by name.
func ExpectedTensors(cfg *Config) ([]TensorSpec, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("vae: %w", err)
	}
	var b builder
	b.build(cfg)
	sort.Slice(b.specs, func(i, j int) bool { return b.specs[i].Name < b.specs[j].Name })
	return b.specs, nil
}
