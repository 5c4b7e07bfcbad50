package adaln

import (
	"strings"

	"github.com/dcdit/dcdit/params"
)

// BlockParamGroups returns the groups of a block parameter named
// prefix + "<index>." + one of BlockShapes' names, or nil for another
// name (params.BlockGroups).
func BlockParamGroups(name, prefix string) []string {
	return params.BlockGroups(name, prefix, "attn.", "mlp.")
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
