package core

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
)

// Link authentication. Nothing outside the job is trusted: a transport
// that accepts connections (softrc's TCP ports, the EXTOLL software card's
// engines) lets a link carry traffic only once both ends have proved they
// hold the job's secret, the JobKey, in a challenge–response at the
// link's start. The key itself never goes on the wire; each side answers
// the other's fresh nonce with an HMAC-SHA256 over both nonces and both
// ends' identities, so a recorded answer is worth nothing on another link
// and one side's answer cannot be reflected back as the other's.
//
//	dialer   → acceptor  hello: dialer's identity, nonce Nd
//	acceptor → dialer    Na, Proof(acceptor)     the dialer checks it,
//	dialer   → acceptor  Proof(dialer)           then sends its traffic
//
// Every member learns the key through the job's bootstrap
// (ExchangeJobKey): rank 0 draws it from crypto/rand and publishes it,
// and the others read it after a fence. So the key is as secret as the
// bootstrap's exchange: `gobtl run`'s unix socket in a 0700 directory,
// an inherited PMI_FD, a PMIx server — all readable only by the job's
// user, who can read the ranks' memory anyway.

// Sizes of the authentication's pieces.
const (
	// JobKeySize is the length of the job's secret.
	JobKeySize = 32
	// NonceSize is the length of a challenge.
	NonceSize = 16
	// ProofSize is the length of an answer (HMAC-SHA256).
	ProofSize = sha256.Size
)

// ErrNoJobKey reports a transport asked to authenticate its links without
// a job key to do it with.
var ErrNoJobKey = errors.New("no job key to authenticate links with")

// JobKey is a job's shared secret. Its zero value is not a key; make one
// with NewJobKey or ExchangeJobKey.
type JobKey struct{ k [JobKeySize]byte }

// Nonce is one side's challenge on one link.
type Nonce [NonceSize]byte

// Proof is one side's answer to a challenge.
type Proof [ProofSize]byte

// NewJobKey draws a fresh key from the operating system's random source.
func NewJobKey() *JobKey {
	var k JobKey
	rand.Read(k.k[:])
	return &k
}

// ParseJobKey takes a key published by NewJobKey's holder.
func ParseJobKey(b []byte) (*JobKey, error) {
	if len(b) != JobKeySize {
		return nil, fmt.Errorf("core: a job key is %d bytes, not %d", JobKeySize, len(b))
	}
	var k JobKey
	copy(k.k[:], b)
	return &k, nil
}

// NewNonce draws a fresh challenge.
func NewNonce() Nonce {
	var n Nonce
	rand.Read(n[:])
	return n
}

// JobKeyer is implemented by a Bootstrap that holds the job's key itself
// (the in-process group of boot.Group), so that no exchange is needed.
type JobKeyer interface {
	JobKey() *JobKey
}

// JobKeyOf returns the key b holds, or nil.
func JobKeyOf(b Bootstrap) *JobKey {
	if k, ok := b.(JobKeyer); ok {
		return k.JobKey()
	}
	return nil
}

// jobKeyName is the bootstrap key rank 0 publishes the job key under.
const jobKeyName = "gobtl.jobkey"

// ExchangeJobKey gives every rank of b's job the same fresh key: the
// bootstrap's own (JobKeyOf) if it holds one, else one rank 0 draws and
// publishes, read by every rank after a fence. It is collective: every
// rank calls it, once, before any transport opens.
func ExchangeJobKey(ctx context.Context, b Bootstrap) (*JobKey, error) {
	if k := JobKeyOf(b); k != nil {
		return k, nil
	}
	if b.Size() == 1 {
		return NewJobKey(), nil
	}
	if b.Rank() == 0 {
		if err := b.Put(jobKeyName, NewJobKey().k[:]); err != nil {
			return nil, fmt.Errorf("core: publish the job key: %w", err)
		}
	}
	if err := b.Fence(ctx); err != nil {
		return nil, fmt.Errorf("core: exchange the job key: %w", err)
	}
	v, err := b.Get(ctx, 0, jobKeyName)
	if err != nil {
		return nil, fmt.Errorf("core: read the job key: %w", err)
	}
	return ParseJobKey(v)
}

// Role says which end of a link a proof comes from.
type Role uint8

// The two ends of a link.
const (
	Dialer Role = iota + 1
	Acceptor
)

// Transcript is what both ends of a link agree on by the time each
// answers: the protocol (one label per kind of link, so that a proof for
// one never serves another), each end's identity as the link's protocol
// names it (a port address, a rank) and both challenges.
type Transcript struct {
	Protocol           string
	Dialer, Acceptor   []byte
	DialerNonce, Nonce Nonce // Nonce is the acceptor's
}

// Prove answers t as role: HMAC-SHA256 under the key over the role and
// the transcript, every variable-length part length-prefixed.
func (k *JobKey) Prove(role Role, t *Transcript) Proof {
	m := hmac.New(sha256.New, k.k[:])
	var n [4]byte
	put := func(b []byte) {
		binary.LittleEndian.PutUint32(n[:], uint32(len(b)))
		m.Write(n[:])
		m.Write(b)
	}
	put([]byte("gobtl link v1"))
	put([]byte(t.Protocol))
	m.Write([]byte{byte(role)})
	put(t.Dialer)
	put(t.Acceptor)
	m.Write(t.DialerNonce[:])
	m.Write(t.Nonce[:])
	var p Proof
	m.Sum(p[:0])
	return p
}

// Check reports whether p answers t as role, in constant time.
func (k *JobKey) Check(role Role, t *Transcript, p []byte) bool {
	want := k.Prove(role, t)
	return hmac.Equal(want[:], p)
}
