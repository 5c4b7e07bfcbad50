package params

import (
	"slices"
	"strings"
)

// The parameter groups: the one vocabulary in which a recipe's stages say
// what trains (trainable, frozen) and which learning-rate groups scale,
// and in which a model says where each of its parameters belongs (a
// backbone through its ParamGroups method, the DC scaffold through
// dc.ScaffoldParamGroups, a DC model through dc.Model.ParamGroups). The
// names mean the same whichever backbone a model has; Groups says what
// each one holds.
const (
	GroupAll              = "all"
	GroupEmbedders        = "embedders"
	GroupTimestepEmbedder = "timestep_embedder"
	GroupClassEmbedder    = "class_embedder"
	GroupBackbone         = "backbone"
	GroupAdaLN            = "adaln"
	GroupAttention        = "attention"
	GroupMLP              = "mlp"
	GroupScaffold         = "scaffold"
	GroupLatentEmbedder   = "latent_embedder"
	GroupEncoder          = "encoder"
	GroupRouter           = "router"
	GroupResidual         = "residual"
	GroupDecoder          = "decoder"
	GroupBackboneNorm     = "backbone_norm"
	GroupFinalLayer       = "final_layer"
	GroupWideHead         = "wide_head"
	GroupLatentSkip       = "latent_skip"
	GroupCondNorm         = "cond_norm"
)

// GroupInfo is one parameter group: its name and what it holds.
type GroupInfo struct {
	Name string
	Doc  string
}

// Groups lists every parameter group, in the order reports and messages
// use, with what each holds. A model's ParamGroups never lists GroupAll,
// which holds every parameter.
func Groups() []GroupInfo {
	return []GroupInfo{
		{GroupAll, "every parameter"},
		{GroupEmbedders, "the conditioning embedders: timestep, class labels, captions (Z-Image's cap_embedder); a fixed-patch model's patch embedding too"},
		{GroupTimestepEmbedder, "the timestep MLP (t_embedder.*)"},
		{GroupClassEmbedder, "the class-label table (y_embedder.*)"},
		{GroupBackbone, "the transformer blocks (DiT's blocks, DC-DiT's main network's layers, Z-Image's layers and refiners)"},
		{GroupAdaLN, "the blocks' adaLN modulation"},
		{GroupAttention, "the blocks' attention"},
		{GroupMLP, "the blocks' MLPs (Z-Image: feed-forward)"},
		{GroupScaffold, "every part a DC model adds to the backbone: the groups from latent_embedder to cond_norm below, in a DC model"},
		{GroupLatentEmbedder, "DC: the scaffold's 3×3 conv latent embedder (x_embedder.*); a fixed-patch model: its patch embedding"},
		{GroupEncoder, "DC: the encoder's conv blocks and RMSNorm (hnet.encoder.*)"},
		{GroupRouter, "DC: the router (hnet.routing_module.*)"},
		{GroupResidual, "DC: the residual projection around the backbone (hnet.residual_proj.*)"},
		{GroupDecoder, "DC: the decoder's conv blocks and RMSNorm (hnet.decoder.*)"},
		{GroupBackboneNorm, "the norm after the blocks: DC-DiT's main network's RMSNorm (a part the DC model adds, so also scaffold)"},
		{GroupFinalLayer, "the output layer (final_layer.*): DC, the scaffold's; a fixed-patch model, its own"},
		{GroupWideHead, "DC: the wide output head (wide_head.*, scaffold.head = \"wide\")"},
		{GroupLatentSkip, "DC: the latent skip (latent_skip.*, scaffold.latent_skip)"},
		{GroupCondNorm, "DC: the conditioning adaptor (cond_norm.*, scaffold.cond_norm)"},
	}
}

// GroupNames lists the names of Groups, in its order.
func GroupNames() []string {
	gs := Groups()
	out := make([]string, len(gs))
	for i, g := range gs {
		out[i] = g.Name
	}
	return out
}

// IsGroup reports whether s names a parameter group.
func IsGroup(s string) bool { return slices.Contains(GroupNames(), s) }

// InGroup reports whether group holds a parameter whose groups (what its
// model's ParamGroups answers for it) are groups: GroupAll holds every
// parameter, any other group those that list it.
func InGroup(group string, groups []string) bool {
	return group == GroupAll || slices.Contains(groups, group)
}

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
