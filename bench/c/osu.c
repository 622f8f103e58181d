/*
 * bench/c/osu.c: the osu-style benchmarks of `gobtl bench` (latency, bw, bibw,
 * msgrate, and the collectives allreduce, reduce, bcast, allgather, alltoall,
 * barrier) written against MPI, with the same algorithms, defaults and JSON
 * report, so that bench/compare runs gobtl and Open MPI side by side. The
 * collectives are MPI's own (Open MPI: coll/tuned's decision), timed as
 * bench/coll.go times gobtl's: each call on its own, a barrier after it
 * (untimed), the mean over ranks of every rank's mean latency, and the
 * extremes; reductions sum float32 vectors of size bytes, roots are 0,
 * allgather and alltoall move size bytes per rank (per pair).
 *
 *   mpirun -np 2 ./osu latency --sizes 8,1048576 [--iters N] [--warmup N] [--window W]
 *
 * Output: {"bench":NAME,"ranks":N,"config":{...},"rows":[{"size":B,"lat_us":...}]}
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define TAG_DATA 1
#define TAG_ACK 2
#define MAX_SIZES 64

static int is_coll(const char *bench) {
	static const char *names[] = {"allreduce", "reduce", "bcast", "allgather", "alltoall", "barrier", NULL};
	for (int i = 0; names[i]; i++) if (!strcmp(bench, names[i])) return 1;
	return 0;
}

/* one_coll runs one call of the collective bench on n bytes (per rank for
 * allgather and alltoall). */
static void one_coll(const char *bench, char *sbuf, char *rbuf, long n, int nranks) {
	if (!strcmp(bench, "allreduce")) MPI_Allreduce(sbuf, rbuf, (int)(n / 4), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
	else if (!strcmp(bench, "reduce")) MPI_Reduce(sbuf, rbuf, (int)(n / 4), MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
	else if (!strcmp(bench, "bcast")) MPI_Bcast(sbuf, (int)n, MPI_CHAR, 0, MPI_COMM_WORLD);
	else if (!strcmp(bench, "allgather")) MPI_Allgather(sbuf, (int)n, MPI_CHAR, rbuf, (int)n, MPI_CHAR, MPI_COMM_WORLD);
	else if (!strcmp(bench, "alltoall")) MPI_Alltoall(sbuf, (int)n, MPI_CHAR, rbuf, (int)n, MPI_CHAR, MPI_COMM_WORLD);
	else MPI_Barrier(MPI_COMM_WORLD);
	(void)nranks;
}

static int iters_for(const char *bench, long size) {
	if (is_coll(bench)) return size <= 8192 ? 1000 : 100;
	if (!strcmp(bench, "latency")) return size <= 8192 ? 10000 : 1000;
	if (!strcmp(bench, "msgrate")) return size <= 8192 ? 10000 : 100;
	return size <= 8192 ? 100 : 20; /* bw, bibw */
}

static long parse_size(const char *s) {
	char *end;
	double v = strtod(s, &end);
	if (!strcasecmp(end, "k") || !strcasecmp(end, "kib")) v *= 1024;
	else if (!strcasecmp(end, "m") || !strcasecmp(end, "mib")) v *= 1024 * 1024;
	else if (!strcasecmp(end, "kb")) v *= 1e3;
	else if (!strcasecmp(end, "mb")) v *= 1e6;
	else if (*end && strcasecmp(end, "b")) { fprintf(stderr, "osu: bad size %s\n", s); exit(2); }
	return (long)v;
}

int main(int argc, char **argv) {
	MPI_Init(&argc, &argv);
	int rank, nranks;
	MPI_Comm_rank(MPI_COMM_WORLD, &rank);
	MPI_Comm_size(MPI_COMM_WORLD, &nranks);
	if (argc < 2) { if (!rank) fprintf(stderr, "usage: osu latency|bw|bibw|msgrate|allreduce|reduce|bcast|allgather|alltoall|barrier [--sizes a,b] [--iters N] [--warmup N] [--window W]\n"); MPI_Abort(MPI_COMM_WORLD, 2); }
	const char *bench = argv[1];
	long sizes[MAX_SIZES]; int nsizes = 0;
	int iters_opt = 0, warmup_opt = 0, window = 64;
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--sizes") && i + 1 < argc) {
			char *list = strdup(argv[++i]);
			for (char *t = strtok(list, ","); t && nsizes < MAX_SIZES; t = strtok(NULL, ",")) sizes[nsizes++] = parse_size(t);
			free(list);
		} else if (!strcmp(argv[i], "--iters") && i + 1 < argc) iters_opt = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) warmup_opt = atoi(argv[++i]);
		else if (!strcmp(argv[i], "--window") && i + 1 < argc) window = atoi(argv[++i]);
		else { if (!rank) fprintf(stderr, "osu: unknown argument %s\n", argv[i]); MPI_Abort(MPI_COMM_WORLD, 2); }
	}
	if (!nsizes) sizes[nsizes++] = 8;
	if ((!is_coll(bench) && nranks < 2) || (!strcmp(bench, "msgrate") && nranks % 2)) { if (!rank) fprintf(stderr, "osu: need an even number of ranks >= 2\n"); MPI_Abort(MPI_COMM_WORLD, 2); }
	long maxsize = 0;
	for (int i = 0; i < nsizes; i++) if (sizes[i] > maxsize) maxsize = sizes[i];
	long buflen = is_coll(bench) ? maxsize * nranks : maxsize;
	char *sbuf = malloc(buflen + 1), *rbuf = malloc(buflen + 1), ack[4] = {0};
	for (long i = 0; i < buflen; i++) sbuf[i] = (char)i;
	memset(rbuf, 0, buflen + 1);
	MPI_Request *reqs = malloc(sizeof(MPI_Request) * 2 * window);

	if (!rank) printf("{\"bench\":\"%s\",\"ranks\":%d,\"config\":{\"window\":%d,\"stack\":\"openmpi\"},\"rows\":[", bench, nranks, window);
	for (int si = 0; si < nsizes; si++) {
		long n = sizes[si];
		int iters = iters_opt > 0 ? iters_opt : iters_for(bench, n);
		int warmup = warmup_opt > 0 ? warmup_opt : (iters / 10 > 2 ? iters / 10 : 2);
		double t0 = 0, el = 0;
		MPI_Barrier(MPI_COMM_WORLD);
		if (is_coll(bench)) {
			double total = 0;
			for (int i = 0; i < warmup + iters; i++) {
				t0 = MPI_Wtime();
				one_coll(bench, sbuf, rbuf, n, nranks);
				if (i >= warmup) total += MPI_Wtime() - t0;
				MPI_Barrier(MPI_COMM_WORLD);
			}
			double mine = total * 1e6 / iters, sum = 0, lo = 0, hi = 0;
			MPI_Reduce(&mine, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
			MPI_Reduce(&mine, &lo, 1, MPI_DOUBLE, MPI_MIN, 0, MPI_COMM_WORLD);
			MPI_Reduce(&mine, &hi, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
			if (!rank) printf("%s{\"size\":%ld,\"lat_us\":%.6g,\"lat_min_us\":%.6g,\"lat_max_us\":%.6g}", si ? "," : "", n, sum / nranks, lo, hi);
		} else if (!strcmp(bench, "latency")) {
			if (rank < 2) {
				int peer = 1 - rank;
				for (int i = 0; i < warmup + iters; i++) {
					if (i == warmup) t0 = MPI_Wtime();
					if (rank == 0) {
						MPI_Send(sbuf, n, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD);
						MPI_Recv(rbuf, n, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
					} else {
						MPI_Recv(rbuf, n, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
						MPI_Send(sbuf, n, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD);
					}
				}
				el = MPI_Wtime() - t0;
			}
			if (!rank) printf("%s{\"size\":%ld,\"lat_us\":%.6g}", si ? "," : "", n, el * 1e6 / (2.0 * iters));
		} else if (!strcmp(bench, "bw") || !strcmp(bench, "msgrate")) {
			int half = !strcmp(bench, "bw") ? 1 : nranks / 2;
			int sender = rank < half, active = rank < 2 * half;
			int peer = sender ? rank + half : rank - half;
			if (active) {
				for (int i = 0; i < warmup + iters; i++) {
					if (i == warmup) t0 = MPI_Wtime();
					for (int w = 0; w < window; w++) {
						if (sender) MPI_Isend(sbuf, n, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD, &reqs[w]);
						else MPI_Irecv(rbuf, n, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD, &reqs[w]);
					}
					MPI_Waitall(window, reqs, MPI_STATUSES_IGNORE);
					if (sender) MPI_Recv(ack, 4, MPI_CHAR, peer, TAG_ACK, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
					else MPI_Send(ack, 4, MPI_CHAR, peer, TAG_ACK, MPI_COMM_WORLD);
				}
				el = MPI_Wtime() - t0;
			}
			double mine = sender && active ? el : 0, worst = 0;
			MPI_Reduce(&mine, &worst, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
			double msgs = (double)half * window * iters;
			if (!rank) {
				if (!strcmp(bench, "bw")) printf("%s{\"size\":%ld,\"mbps\":%.6g}", si ? "," : "", n, msgs * n / worst / 1e6);
				else printf("%s{\"size\":%ld,\"msgs_per_s\":%.6g,\"mbps\":%.6g}", si ? "," : "", n, msgs / worst, msgs * n / worst / 1e6);
			}
		} else if (!strcmp(bench, "bibw")) {
			if (rank < 2) {
				int peer = 1 - rank;
				for (int i = 0; i < warmup + iters; i++) {
					if (i == warmup) t0 = MPI_Wtime();
					for (int w = 0; w < window; w++) MPI_Irecv(rbuf, n, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD, &reqs[w]);
					for (int w = 0; w < window; w++) MPI_Isend(sbuf, n, MPI_CHAR, peer, TAG_DATA, MPI_COMM_WORLD, &reqs[window + w]);
					MPI_Waitall(2 * window, reqs, MPI_STATUSES_IGNORE);
				}
				el = MPI_Wtime() - t0;
			}
			if (!rank) printf("%s{\"size\":%ld,\"mbps\":%.6g}", si ? "," : "", n, 2.0 * window * iters * n / el / 1e6);
		} else {
			if (!rank) fprintf(stderr, "osu: unknown benchmark %s\n", bench);
			MPI_Abort(MPI_COMM_WORLD, 2);
		}
	}
	if (!rank) printf("],\"counters\":{}}\n");
	free(sbuf); free(rbuf); free(reqs);
	MPI_Finalize();
	return 0;
}
