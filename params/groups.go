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
	GroupTokenEmbedder    = "token_embedder"
	GroupDroppedContext   = "dropped_context"
	GroupCondNorm         = "cond_norm"
	GroupWidthRouter      = "width_router"
)

// GroupInfo is one parameter group: its name and what it holds.
type GroupInfo struct {
	Name string
	Doc  string
}

// Groups lists every parameter group, in the order reports and messages
// use, with what each holds. A model's ParamGroups never lists GroupAll,
// which holds every parameter; a parameter in no other group (Z-Image's
// pad tokens; inside a DC model, a pretrained backbone's own patch
// embedding and final layer, which take no gradient) is in GroupAll
// alone. docs/recipes.md shows this table.
func Groups() []GroupInfo {
	return []GroupInfo{
		{GroupAll, "every parameter"},
		{GroupEmbedders, "the conditioning embedders: the timestep MLP, the class-label table, Z-Image's caption embedder; in a fixed-patch model also its patch embedding"},
		{GroupTimestepEmbedder, "the timestep MLP (t_embedder.*)"},
		{GroupClassEmbedder, "the class-label table (y_embedder.*)"},
		{GroupBackbone, "the transformer blocks: DiT's blocks, DC-DiT's main network's layers, Z-Image's layers and refiners"},
		{GroupAdaLN, "the blocks' adaLN modulation"},
		{GroupAttention, "the blocks' attention (Z-Image's with its QK norms)"},
		{GroupMLP, "the blocks' MLPs (Z-Image's feed-forward)"},
		{GroupScaffold, "in a DC model, every part it adds to the backbone: latent_embedder, encoder, router, residual, decoder, backbone_norm, final_layer, wide_head, latent_skip, cond_norm, token_embedder, dropped_context"},
		{GroupLatentEmbedder, "a DC model's 3×3 conv latent embedder (x_embedder.*); a fixed-patch model's patch embedding"},
		{GroupEncoder, "the encoder's conv blocks and RMSNorm (hnet.encoder.*)"},
		{GroupRouter, "the router (hnet.routing_module.*)"},
		{GroupResidual, "the residual projection around the backbone (hnet.residual_proj.*)"},
		{GroupDecoder, "the decoder's conv blocks and RMSNorm, and the chosen-cells embedding (hnet.decoder.*; scaffold.chosen_embedding)"},
		{GroupBackboneNorm, "the norm after the blocks: DC-DiT's main network's RMSNorm, which DC-DiT adds to DiT's blocks (so it is also in scaffold)"},
		{GroupFinalLayer, "the output layer (final_layer.*): a DC model's scaffold's, a fixed-patch model's own"},
		{GroupWideHead, "the wide output head (wide_head.*; scaffold.head = \"wide\")"},
		{GroupLatentSkip, "the latent skip (latent_skip.*; scaffold.latent_skip)"},
		{GroupCondNorm, "the conditioning adaptor (cond_norm.*; scaffold.cond_norm)"},
		{GroupTokenEmbedder, "the token embedder the backbone reads (token_embedder.*; scaffold.token_embedder)"},
		{GroupDroppedContext, "what the kept tokens take from their dropped neighbours (dropped_context.*; scaffold.dropped_context)"},
		{GroupWidthRouter, "the blocks' DyDiT width routers (*.dydit.*; added by a stage's dydit_lambda, also in backbone)"},
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
