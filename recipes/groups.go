package recipes

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/dcdit/dcdit/dc/hnet"
	"github.com/dcdit/dcdit/editdist"
)

// Parameter group names usable in a stage's trainable and frozen lists.
// They refer to the model being trained: for a DC model, the reference
// DC-DiT names (the scaffold's as dc.ScaffoldShapes lists them, the main
// network's under hnet.Prefix, t_embedder.* and y_embedder.*); for a
// fixed-patch DiT, DiT's original names.
const (
	GroupAll              = "all"               // every parameter
	GroupEmbedders        = "embedders"         // timestep and class embedders (DiT: also the patch embedding)
	GroupTimestepEmbedder = "timestep_embedder" // t_embedder.*
	GroupClassEmbedder    = "class_embedder"    // y_embedder.*
	GroupBackbone         = "backbone"          // the transformer blocks
	GroupAdaLN            = "adaln"             // the blocks' adaLN modulation
	GroupAttention        = "attention"         // the blocks' attention
	GroupMLP              = "mlp"               // the blocks' MLPs
	GroupScaffold         = "scaffold"          // every new DC part below
	GroupLatentEmbedder   = "latent_embedder"   // DC: the conv 3×3 latent embedder; DiT: the patch embedding
	GroupEncoder          = "encoder"           // hnet.encoder.*
	GroupRouter           = "router"            // hnet.routing_module.*
	GroupResidual         = "residual"          // hnet.residual_proj.*
	GroupDecoder          = "decoder"           // hnet.decoder.*
	GroupBackboneNorm     = "backbone_norm"     // the RMSNorm after the DC main network
	GroupFinalLayer       = "final_layer"       // final_layer.*
	GroupWideHead         = "wide_head"         // wide_head.* (scaffold.head = "wide")
	GroupLatentSkip       = "latent_skip"       // latent_skip.* (scaffold.latent_skip)
	GroupCondNorm         = "cond_norm"         // cond_norm.* (scaffold.cond_norm)
)

// GroupNames lists the group names in a stable order.
var GroupNames = []string{
	GroupAll, GroupEmbedders, GroupTimestepEmbedder, GroupClassEmbedder, GroupBackbone, GroupAdaLN, GroupAttention,
	GroupMLP, GroupScaffold, GroupLatentEmbedder, GroupEncoder, GroupRouter, GroupResidual, GroupDecoder,
	GroupBackboneNorm, GroupFinalLayer, GroupWideHead, GroupLatentSkip, GroupCondNorm,
}

// blockRE matches a transformer block's parameters in either naming (the
// DC main network's or DiT's) and captures the part after the index.
var blockRE = regexp.MustCompile(`^(?:` + regexp.QuoteMeta(hnet.Prefix) + `layers|blocks)\.\d+\.(.*)$`)

// InGroup reports whether the parameter name belongs to group, for a DC
// model (dc true) or a fixed-patch DiT. In a DC model, a pretrained
// backbone kept under its own names after "backbone." (a DiT's, a
// Z-Image's) falls in the embedder and block groups — Z-Image's caption
// embedder, layers and refiners among them — and in none of the
// scaffold's, although its patch embedding and final layer share their
// names.
func InGroup(group, name string, dc bool) bool {
	inner, pretrained := strings.CutPrefix(name, backbonePrefix)
	pretrained = pretrained && dc
	re := blockRE
	if pretrained {
		name, re = inner, pretrainedRE
	}
	has := func(prefix string) bool { return strings.HasPrefix(name, prefix) }
	block := re.FindStringSubmatch(name)
	inBlock := func(prefixes ...string) bool {
		return block != nil && slices.ContainsFunc(prefixes, func(p string) bool { return strings.HasPrefix(block[1], p) })
	}
	switch group {
	case GroupAll:
		return true
	case GroupTimestepEmbedder:
		return has("t_embedder.")
	case GroupClassEmbedder:
		return has("y_embedder.")
	case GroupEmbedders:
		return has("t_embedder.") || has("y_embedder.") || has("cap_embedder.") || (!dc && has("x_embedder."))
	case GroupBackbone:
		return block != nil
	case GroupAdaLN:
		return inBlock("adaLN_modulation.")
	case GroupAttention:
		return inBlock("attn.", "attention.")
	case GroupMLP:
		return inBlock("mlp.", "feed_forward.")
	}
	if pretrained {
		return false
	}
	switch group {
	case GroupLatentEmbedder:
		return has("x_embedder.")
	case GroupEncoder:
		return has("hnet.encoder.")
	case GroupRouter:
		return has("hnet.routing_module.")
	case GroupResidual:
		return has("hnet.residual_proj.")
	case GroupDecoder:
		return has("hnet.decoder.")
	case GroupBackboneNorm:
		return has(hnet.Prefix + "rmsnorm.")
	case GroupFinalLayer:
		return has("final_layer.")
	case GroupWideHead:
		return has("wide_head.")
	case GroupLatentSkip:
		return has("latent_skip.")
	case GroupCondNorm:
		return has("cond_norm.")
	case GroupScaffold:
		if !dc {
			return false
		}
		for _, g := range []string{GroupLatentEmbedder, GroupEncoder, GroupRouter, GroupResidual, GroupDecoder, GroupBackboneNorm, GroupFinalLayer, GroupWideHead, GroupLatentSkip, GroupCondNorm} {
			if InGroup(g, name, dc) {
				return true
			}
		}
	}
	return false
}

// isGroup reports whether s is a group name.
func isGroup(s string) bool { return slices.Contains(GroupNames, s) }

// checkSelector reports why a trainable/frozen entry is neither a group
// name nor a valid glob pattern ("" when it is fine).
func checkSelector(s string) string {
	if isGroup(s) {
		return ""
	}
	if !strings.ContainsAny(s, ".*?[") {
		msg := fmt.Sprintf("expected a group (%s) or a glob pattern over parameter names such as \"hnet.encoder.*\"", strings.Join(GroupNames, ", "))
		if g := closest(s, GroupNames); g != "" {
			msg = fmt.Sprintf("did you mean %s? %s", g, msg)
		}
		return msg
	}
	if _, err := path.Match(s, ""); err != nil {
		return fmt.Sprintf("expected a valid glob pattern: %v", err)
	}
	return ""
}

// matches reports whether a trainable/frozen entry selects name.
func matches(sel, name string, dc bool) bool {
	if isGroup(sel) {
		return InGroup(sel, name, dc)
	}
	ok, _ := path.Match(sel, name)
	return ok
}

// Trains reports whether the stage trains the named parameter: some
// trainable entry selects it and no frozen entry does. dc says whether
// the model has a scaffold (it changes what "embedders" and "scaffold"
// cover).
func (s *Stage) Trains(name string, dc bool) bool {
	sel := false
	for _, t := range s.Trainable {
		if matches(t, name, dc) {
			sel = true
			break
		}
	}
	if !sel {
		return false
	}
	for _, f := range s.Frozen {
		if matches(f, name, dc) {
			return false
		}
	}
	return true
}

func closest(s string, choices []string) string {
	best, bestD := "", 3
	for _, c := range choices {
		if d := editdist.Distance(strings.ToLower(s), c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}

// backbonePrefix is dc.BackbonePrefix: a pretrained backbone (DiT or
// Z-Image) kept under its own names inside a DC model.
const backbonePrefix = "backbone."

// pretrainedRE is blockRE for a pretrained backbone kept under its own
// names (DiT's blocks, Z-Image's layers and refiners).
var pretrainedRE = regexp.MustCompile(`^(?:blocks|layers|noise_refiner|context_refiner)\.\d+\.(.*)$`)
