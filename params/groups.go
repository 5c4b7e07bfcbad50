package params

import "strings"

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

// BlockGroups returns the groups of a transformer block's parameter named
// prefix + "<index>." + its name inside the block, or nil for another
// name: every one is in GroupBackbone, adaLN_modulation.* also in
// GroupAdaLN, names under attention (the block's attention module, e.g.
// "attn.") in GroupAttention and under mlp in GroupMLP; norms and anything
// else go with the block as a whole.
func BlockGroups(name, prefix, attention, mlp string) []string {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok {
		return nil
	}
	idx, inner, ok := strings.Cut(rest, ".")
	if !ok || idx == "" || strings.Trim(idx, "0123456789") != "" {
		return nil
	}
	switch {
	case strings.HasPrefix(inner, "adaLN_modulation."):
		return []string{GroupBackbone, GroupAdaLN}
	case strings.HasPrefix(inner, attention):
		return []string{GroupBackbone, GroupAttention}
	case strings.HasPrefix(inner, mlp):
		return []string{GroupBackbone, GroupMLP}
	}
	return []string{GroupBackbone}
}
