package adaln

import (
	"strings"

	"github.com/dcdit/dcdit/params"
)

// BlockParamGroups returns the groups of a block parameter named
// prefix + "<index>." + one of BlockShapes' or RouterShapes' names, or
// nil for another name (params.BlockGroups; the width routers also in
// params.GroupWidthRouter).
func BlockParamGroups(name, prefix string) []string {
	g := params.BlockGroups(name, prefix, "attn.", "mlp.")
	if _, inner, _ := strings.Cut(strings.TrimPrefix(name, prefix), "."); g != nil && strings.HasPrefix(inner, RouterPrefix) {
		return append(g, params.GroupWidthRouter)
	}
	return g
}

// EmbedderParamGroups returns the groups of one of the embedders'
// parameters (EmbedderShapes' names), or nil for another name.
func EmbedderParamGroups(name string) []string {
	switch {
	case strings.HasPrefix(name, "t_embedder."):
		return []string{params.GroupEmbedders, params.GroupTimestepEmbedder}
	case strings.HasPrefix(name, "y_embedder."):
		return []string{params.GroupEmbedders, params.GroupClassEmbedder}
	}
	return nil
}
