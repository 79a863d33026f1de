// Package usertest is a module of its own that imports echotest as a user's module does
// (through a replace of github.com/echocache/echocache): its tests compile against the
// public API only, and make test runs them.
package usertest
