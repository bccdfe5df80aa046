// Package docker is the Docker tier of leasehold's chaos suite: Redis runs in
// a container built locally (FROM scratch, from the host's redis-server and
// the libraries ldd lists: no registry is needed), and the nemeses pause the
// container (cgroup freezer) and disconnect it from its network. It uses the
// scenarios, holders and checker of package chaos.
//
// It is a module of its own so that testcontainers-go stays out of
// leasehold's dependencies. Its tests run wherever a Docker engine answers
// and skip, saying so, where none does.
package docker
