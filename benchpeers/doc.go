// Package benchpeers measures fairsched beside the libraries a Go user
// would pick instead, in the same run, so that the speed targets
// that are ratios to a peer can be checked on any machine. It is a module
// of its own so that fairsched's users never download the peers.
//
//	cd benchpeers && go test -run '^$' -bench . -benchtime 20x
package benchpeers
