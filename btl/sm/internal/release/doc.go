// Package release has the release stores with which sm publishes data to
// another process through shared memory (fast boxes, FIFO cells, a
// fragment's done flag) without the full barrier of an atomic store: on
// amd64 a plain MOV, because TSO never reorders a store with older stores,
// called through assembly so that the compiler cannot move stores across
// it; elsewhere the sequentially consistent atomic store.
package release
