// Package lint holds checks over the module's own source, run as tests:
// rules of the house that go vet does not know, such as that every
// numeric check of a test must fail on NaN. It has no code of its own;
// its tests parse and type-check the module.
package lint
