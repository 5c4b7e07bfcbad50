// Package families registers dcdit's built-in model families: importing
// it (for its side effect, as image/png registers a format) makes DiT,
// Z-Image and DC-DiT's own main network known to the family registry, so
// that checkpoints of every built-in kind load. A program or library
// user with a backbone of their own imports that package too; nothing
// else in dcdit changes.
package families

import (
	// Each registers its family in an init function.
	_ "github.com/dcdit/dcdit/dc/hnet"
	_ "github.com/dcdit/dcdit/dit"
	_ "github.com/dcdit/dcdit/zimage"
)
