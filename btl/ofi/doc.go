// Package ofi is a BTL over libfabric (package doc in progress).
package ofi
