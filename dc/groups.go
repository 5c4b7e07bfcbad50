package dc

import (
	"slices"
	"strings"

	"github.com/dcdit/dcdit/params"
)

// ScaffoldParamGroups returns the groups of one of the scaffold's
// parameters (a name of ScaffoldShapes' form): params.GroupScaffold and
// its part's group (latent embedder, token embedder, dropped context, encoder, router, residual, decoder,
// final layer, wide head, latent skip, conditioning adaptor); nil for
// another name.
func ScaffoldParamGroups(name string) []string {
	has := func(prefix string) bool { return strings.HasPrefix(name, prefix) }
	var part string
	switch {
	case has("x_embedder."):
		part = params.GroupLatentEmbedder
	case has("token_embedder."):
		part = params.GroupTokenEmbedder
	case has("dropped_context."):
		part = params.GroupDroppedContext
	case has("hnet.encoder."):
		part = params.GroupEncoder
	case has("hnet.routing_module."):
		part = params.GroupRouter
	case has("hnet.residual_proj."):
		part = params.GroupResidual
	case has("hnet.decoder."):
		part = params.GroupDecoder
	case has("final_layer."):
		part = params.GroupFinalLayer
	case has("wide_head."):
		part = params.GroupWideHead
	case has("latent_skip."):
		part = params.GroupLatentSkip
	case has("cond_norm."):
		part = params.GroupCondNorm
	default:
		return nil
	}
	return []string{params.GroupScaffold, part}
}

// ParamGroups returns the groups of a parameter of a DC model whose
// backbone answers backbone for its own parameters (the backbone's
// ParamGroups, or its family.Spec's for a model planned from headers):
// the scaffold's (ScaffoldParamGroups), else the backbone's answer, less
// a pretrained backbone's own patch embedding and final layer (its
// params.GroupLatentEmbedder and params.GroupFinalLayer), which the
// scaffold replaces and which take no gradient: those are in no group but
// params.GroupAll.
func ParamGroups(name string, backbone func(name string) []string) []string {
	if g := ScaffoldParamGroups(name); g != nil {
		return g
	}
	return inModel(backbone(name))
}

// ParamGroups returns the groups of one of the model's parameters, the
// scaffold's or its backbone's, as the function ParamGroups says; nil for
// a name that is neither.
func (m *Model) ParamGroups(name string) []string {
	if _, ok := m.Params.Lookup(name); ok {
		return ScaffoldParamGroups(name)
	}
	return inModel(m.Backbone.ParamGroups(name))
}

// inModel is a backbone parameter's groups inside a DC model: none for
// the parts the scaffold replaces.
func inModel(groups []string) []string {
	if slices.Contains(groups, params.GroupLatentEmbedder) || slices.Contains(groups, params.GroupFinalLayer) {
		return nil
	}
	return groups
}
