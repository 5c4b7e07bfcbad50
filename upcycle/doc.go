// Package upcycle grafts the DC scaffold onto a pretrained backbone as a TOML
// recipe describes, and writes the resulting DC checkpoint.
package upcycle
