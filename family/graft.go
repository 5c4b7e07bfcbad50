package family

// PatchEmbedding is a fixed-patch model's patch embedding as the DC
// scaffold's encoder starts from it: a Linear from a p×p patch of C
// latent channels to the model width D.
type PatchEmbedding struct {
	// Patch is p.
	Patch int
	// Weight is [D, C·p²], Bias [D].
	Weight, Bias []float32
	// Index gives the input column that carries latent channel c at
	// offset (dy, dx) in the patch: the model's patch layout.
	Index func(c, dy, dx int) int
}

// FinalLayer is a fixed-patch model's output layer as the DC scaffold's
// wide head starts from it: LayerNorm, adaLN modulation, and a Linear to
// Patch·Patch·Out values ordered (dy, dx, channel).
type FinalLayer struct {
	Patch, Out, Width int
	// NoShift marks a modulation without shift rows (Z-Image's): its
	// rows are the scale's.
	NoShift bool
	// Tensor returns the layer's tensors by their names under
	// final_layer: adaLN_modulation.1.weight, adaLN_modulation.1.bias,
	// linear.weight, linear.bias.
	Tensor func(name string) ([]float32, bool)
}

// Graftable is a teacher whose network a DC model is grafted around
// (upcycle.GraftTeacher): the network becomes the DC model's backbone as
// it is, and the scaffold's encoder and wide head may start from its
// patch embedding and final layer.
type Graftable interface {
	// GraftBackbone returns a copy of the teacher's network as a DC
	// backbone for a rows×cols latent grid, its tensors renamed under
	// arch.DCBackbonePrefix; the teacher is left as it is (it stays the
	// frozen teacher).
	GraftBackbone(rows, cols int) (Backbone, error)
	// PatchEmbedding is the teacher's patch embedding; false when it has
	// none the scaffold's encoder can start from.
	PatchEmbedding() (PatchEmbedding, bool)
	// FinalLayer is the teacher's output layer; false when it has none
	// the wide head can start from.
	FinalLayer() (FinalLayer, bool)
}
