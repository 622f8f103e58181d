// Package patterns generates the communication of the NAS Parallel
// Benchmarks that seed 000 (Liu & Panda, flow control in MPI over
// InfiniBand) evaluates in §6.3: NPB class A, IS, FT, LU, CG and MG on 8
// processes, BT and SP on 16. Table 1 there counts explicit credit
// messages per connection (only LU needs many: 9002 of 48805), Table 2
// the buffers the dynamic scheme ends up posting per connection (≤ 7, LU
// 63). What decides those numbers is the pattern — who sends how many
// messages of what size to whom, and what each rank waits for before it
// sends — not the arithmetic, so a generator here reproduces NPB's
// messages, sizes and dependencies with a short busy spin where NPB
// computes.
//
// A generator is a collective function over a communicator (bench.Comm,
// which *pml.Comm and *gobtl.Comm satisfy): every rank calls it with the
// same Options and gets its Stats — messages and bytes sent per
// destination, messages received per source, the time from the starting
// barrier. Each pattern is also a benchmark of the suite (it registers
// itself with bench.Register): `gobtl bench lu` (and is, ft, cg, mg, bt,
// sp) runs one under `gobtl run`.
//
// # Checked messages
//
// Every message, collectives included (they are written out in
// point-to-point here, see coll.go), goes on one tag, so MPI's
// non-overtaking rule orders all the messages of a connection, and
// carries [seq][key][body]: seq counts the sender's messages to that
// receiver, key hashes (source, destination, seq, length) and the body is
// a stream seeded by the same hash. The receiver knows which message is
// due next and checks every byte: a later one means a message was lost
// (ErrLost), an earlier one a duplicate (ErrDuplicate), anything else
// corruption (ErrCorrupt). At the end each rank sends an 8-byte
// end-of-run marker with its count on every connection it used, so a loss
// or a duplicate of the last message is caught too. Messages are at
// least 8 bytes (MinSize); NPB's 4-byte ones become 8.
//
// # Knobs
//
// Options.Iters is the number of time steps (class A's counts are
// Pattern.ClassAIters, NPB's untimed warm-up step included), Scale
// multiplies the size of every message that carries problem data
// (control-sized messages keep theirs; counts never change), Compute is
// the spin of one compute phase. By default the sizes are class A's and
// the iterations too for IS (11), FT (6) and MG (5); LU, BT and SP run a
// tenth of theirs (25, 20, 40) and CG 5 of 16, which keeps a run on 8
// ranks over a software InfiniBand device (softrc) to a few seconds.
//
// # The patterns, and their message counts at n = 8, T = Iters
//
// IS (integer sort; 2^23 keys, 1024 buckets). Per iteration: an
// allreduce of the bucket sizes (4116 B, recursive doubling), an
// alltoall of the send counts (8 B), an alltoallv of the keys (about
// 2^23/n² keys of 4 B per pair, ±2 % per pair and iteration as NPB's
// balanced bucket ranges give); at the end full_verify's one key to the
// next rank and a reduce of a count to rank 0 (binomial tree). Rank s
// sends d ≠ s: 2T + T·[d = s⊕2^k] + [d = s+1] + [d = s − lowbit(s)];
// in all 136T + 14 messages.
//
// FT (3D FFT; 256×256×128 double complex, 1D layout). A forward FFT
// (twice: NPB's untimed warm-up does one), then per iteration an inverse
// FFT — each FFT one alltoall transpose of 2^27/n² bytes per pair (2 MiB
// at 8 ranks) — and a checksum reduce (16 B) to rank 0. Rank s sends
// d ≠ s: T + 2 + T·[d = s − lowbit(s)]; in all 56(T+2) + 7T.
//
// LU (SSOR on 64^3; ranks on an xdim × ydim grid over i and j, 4×2 at 8,
// rank = row + xdim·col, north/south = row ∓ 1, west/east = col ∓ 1, not
// periodic). Per iteration the lower sweep walks the 62 inner k-planes:
// receive from north and west, compute the plane, send to south and east
// (5 doubles per boundary point: 1240 B and 600–640 B at 8 ranks, less at the
// global boundary as NPB's ist/jst skip it); the upper sweep walks back,
// receiving from south and east and sending to north and west; rhs swaps
// two planes of whole faces with north and south, then west and east
// (exchange_3: 160 KiB and 80 KiB). Setup runs exchange_3 twice and an
// l2norm allreduce (40 B), the end another allreduce. A connection thus
// carries 62 one-way messages per sweep while its reverse direction is
// silent — seed 000's asymmetric case, where credits can only come back
// in explicit credit messages. Rank s sends each grid neighbour 63T + 2,
// plus 2 to each s⊕2^k (the allreduces); in all 1260T + 88.
//
// CG (na = 14000, 25 CG steps per iteration; ranks on an nprows × npcols
// grid, npcols = 2^⌈log2 n/2⌉, 2×4 at 8). A matrix-vector product sums
// the row segment over the ranks of a row — log2(npcols) exchanges with
// the ranks whose column differs in one bit (reduce_exch_proc), 28000 B
// at 8 ranks — and swaps it with the transpose partner (exch_proc; the
// diagonal ranks exchange with themselves, as NPB does through MPI); a
// dot product is log2(npcols) exchanges of 8 B. An iteration is a dot,
// 25 × (product, two dots), the residual (product, dot) and the norms
// (one exchange of 16 B). Rank s sends each row partner 79T (26T large)
// and its transpose partner 26T; in all 1472T. CG needs a power-of-two n,
// as NPB does.
//
// MG (V-cycle on a periodic 256^3 grid, 8 levels; ranks on px × py × pz,
// 2×2×2 at 8). comm3 refreshes the ghost faces of a level axis by axis:
// two messages to each axis neighbour (both neighbours are one rank when
// an axis has two), of the rank's face at that level, 128^2 doubles at
// the top, one point at the bottom (NPB idles some ranks at the coarsest
// levels; here every rank keeps at least one point). An iteration is
// mg3P — comm3 after each restriction (levels 7…1), psinv at level 1,
// resid and psinv at levels 2…8 — and resid at the top: 23 comm3. Setup
// does 2 comm3 and norm2u3 (two allreduces of 8 B), the end norm2u3. Rank
// s sends each of its 3 neighbours 46T + 8; in all 1104T + 192.
//
// BT and SP (64^3, multi-partition). NPB needs n = q² ranks: the grid is
// cut into q×q×q cells, each rank owns q of them — one in every slab of
// every direction — so a line-solve stage keeps every rank busy and the
// cells a rank borders in one direction all belong to one rank; seed 000
// ran them on 16 ranks for that reason. Here the generalized
// multi-partitioning (Darte, Mellor-Crummey et al.) serves any n: write
// n = q·s with s dividing q, s as large as possible (s = q for a square),
// cut the grid into q×q×s cells and give cell (i, j, k) to rank
// ((j−i) mod q)·s + ((k−i) mod s). Each rank owns q cells, one per x and
// y slab and q/s per z slab, and its x±1 neighbours are one rank each, as
// are y±1 and z±1. At 16 ranks this is NPB's layout; at 8 ranks (q = 4,
// s = 2) the cells are 16×16×32 and a rank has 5 partners (its z
// successor and predecessor are one rank). A time step is copy_faces (one
// message per direction: two planes of 5 doubles over the faces of all
// the rank's cells that have a neighbour that way) and a pipelined line
// solve per direction: forward elimination slab by slab toward the
// successor, back substitution toward the predecessor. BT's forward
// message holds a 5×5 block and a 5-vector per face point (30 doubles),
// its backward one a 5-vector; SP's 22 and 10 doubles. The end reduces
// two norms (40 B each) to rank 0. Rank s sends each of its 5 partners
// 4T, plus 2 to its reduce parent; in all 160T + 14.
package patterns
