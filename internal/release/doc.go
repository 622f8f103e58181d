// Package release has the release stores that publish data to another
// process or goroutine through shared memory (sm's fast boxes and FIFO,
// the PML's biased lock) without the full barrier of an atomic store: on
// amd64 a plain MOV, because TSO never reorders a store with older stores,
// called through assembly so that the compiler cannot move stores across
// it; elsewhere the sequentially consistent atomic store.
package release
