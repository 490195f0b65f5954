// Package compose holds the checks of the compose stack
// (docker-compose.yml, its host-ports override, the Dockerfile and the
// observability profile): they agree with the app's configuration
// defaults, pin their images, and mount files that exist. They load the
// files as docker compose does (compose-go), a library only these checks
// use, so they live in the QA module and the app's go.mod stays the
// server's.
package compose
