// Package layering holds the test that checks every import in the module
// against the package map in docs/packages.md: its layers, its concrete
// backbones and who may import them. The package has no code of its own.
package layering
