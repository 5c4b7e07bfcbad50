package hnet

import "github.com/dcdit/dcdit/family"

var _ family.ActivationCounted = Spec{}

// ActivationFloats estimates the float32 values one sample keeps for the
// backward pass of the network's DiT blocks over tokens kept tokens: per
// token 12·D (the adaLN-modulated norms, q, k, v, attention output and
// residuals) and two MLP hidden layers, and each head's attention scores.
// It reads no captions.
func (s Spec) ActivationFloats(tokens, _ int) int64 {
	c, M := s.Config, int64(tokens)
	return int64(c.Depth) * (M*(12*int64(c.Width)+2*int64(c.MLPHidden)) + int64(c.Heads)*M*M)
}
