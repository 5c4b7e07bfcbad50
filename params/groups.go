package params

// Parameter groups a model assigns to its parameters, for freezing and
// learning-rate groups (a backbone answers them through its ParamGroups
// method). The names are the recipe's group names, so a stage's trainable
// and frozen lists mean the same whichever backbone a model has.
const (
	GroupEmbedders        = "embedders"         // the conditioning embedders (DiT: also the patch embedding)
	GroupTimestepEmbedder = "timestep_embedder" // the timestep MLP
	GroupClassEmbedder    = "class_embedder"    // the label table
	GroupBackbone         = "backbone"          // the transformer blocks
	GroupAdaLN            = "adaln"             // the blocks' adaLN modulation
	GroupAttention        = "attention"         // the blocks' attention
	GroupMLP              = "mlp"               // the blocks' MLPs
	GroupLatentEmbedder   = "latent_embedder"   // a backbone's own patch embedding (unused inside a DC model)
	GroupBackboneNorm     = "backbone_norm"     // a norm after the blocks
	GroupFinalLayer       = "final_layer"       // a backbone's own output layer (unused inside a DC model)
)
