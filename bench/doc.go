// Package bench is gobtl's osu-style benchmark suite, run by `gobtl bench
// NAME` under `gobtl run`. Every rank runs the same benchmark; rank 0
// reports.
//
//   - latency: ping-pong between ranks 0 and 1, one-way time in µs
//     (osu_latency);
//   - bw: rank 0 sends a window of non-blocking messages, rank 1 answers
//     the window with a 4-byte ack; MB/s with MB = 10^6 (osu_bw);
//   - bibw: both directions at once (osu_bibw);
//   - msgrate: pairs (i, i+N/2) stream windows of 64 messages, 8 bytes by
//     default; messages per second over all pairs (osu_mbw_mr);
//   - overlap: seed 004 §5.1. Sender overlap: the sender starts an Isend,
//     computes for W µs without calling the library, then waits; the
//     receiver blocks in Recv. Receiver overlap: the receiver starts an
//     Irecv, computes W µs, waits; the sender blocks in Send. The ratio is
//     W/T where T is the whole operation on the computing side;
//   - allreduce, reduce, bcast, allgather, alltoall, barrier: the
//     collectives of package coll as osu_allreduce and its siblings time
//     them — each call timed on its own, a barrier between calls, sizes
//     4 B to 4 MiB (per rank for allgather, per pair for alltoall); the
//     mean over ranks of each rank's mean latency, and the extremes;
//   - multi-pingpong: seed 003 §5.3 (IMB's multi-PingPong): N/2 pairs
//     ping-pong at once; mean and worst one-way latency over the pairs.
//   - pairs: every rank exchanges one message with every rank, itself
//     included, at each size from 0 B to 8 MiB, every byte checked; rank 0
//     gathers every rank's host ("rank_hosts") and counters
//     ("rank_counters"), which show the transport that reached each peer:
//     the wire-up check of a job that spans hosts;
//   - is, ft, cg, mg, lu, bt, sp: the communication patterns of the NAS
//     Parallel Benchmarks that seed 000 §6.3 runs (package
//     bench/patterns, which adds them to the suite with Register when it
//     is imported): Iters time steps, message sizes Scale × class A's,
//     Compute spun per compute phase; every message checked.
//
// Output is an OSU-like table, or with JSON one object {"bench",
// "ranks", "version", "host", "time", "config", "rows": [{"size": B,
// ...}], "counters", "rank_counters"}: gobtl's Version, rank 0's host,
// the start time (RFC 3339), the metric fields lat_us, mbps, msgs_per_s,
// overlap_send and overlap_recv; beside a metric, its minimum, median,
// 99th percentile and maximum over rank 0's timed iterations (lat_us_min,
// lat_us_median, lat_us_p99, lat_us_max; mbps_* per window for bw and bibw; msgrate's
// pair_msgs_per_s_* over the sending pairs); "iters" and "warmup", the
// iterations of the row as --iters counts them (round trips; windows for
// bw and bibw, as osu_bw; messages for msgrate; calls for alltoall), and
// "msgs", the timed messages of bw, bibw and msgrate; "gc", the garbage
// collections that ran during the row's timed loop (each row
// collects the run's garbage before them, so that its timing has none;
// the timed loops allocate nothing, and a "gc" above 0 means something
// did); rank 0's
// counters, and every rank's (rank_counters, gathered after the run: a
// receiver's counters — the stripes it read with rdma_read — are in its
// own).
//
// A pattern reports one row whose size is the mean message size and whose
// fields are time_us (the pattern, the slowest rank's), time_mean_us,
// msgs and bytes (application messages sent by all ranks, to themselves
// too), conns (ordered pairs of distinct ranks that exchanged any),
// msgs_per_conn (their mean), max_conn_msgs,
// iters and scale; and three more keys: "rank_msgs" and "rank_bytes",
// [from][to] matrices of application messages and bytes, and
// "rank_counters", every rank's whole Metrics snapshot taken right after
// the pattern and gathered to rank 0 (flow control's explicit credit
// messages, posted buffers and frames per peer live there).
package bench
