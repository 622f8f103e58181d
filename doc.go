// Package gobtl is the embedding API of the gobtl message-transport
// framework. Importing it compiles in the registered components
// (components.go).
package gobtl
