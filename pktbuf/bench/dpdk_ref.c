/*
 * dpdk_ref.c -- the DPDK side of `pktbuf bench --dpdk`.
 *
 * pktbuf builds this file on demand against the system's DPDK (pkg-config libdpdk) and drives it
 * over a pipe: one command per line on stdin, one JSON object per line on stdout.  The Python
 * side decides every parameter (burst, iterations, drop threshold, chunk sizes) and sends one
 * command per sample, so that pktbuf's samples and these are taken alternately, with the same
 * amount of work, and reduced by the same code.  See pktbuf/bench/dpdk_ref.py and docs/bench.md.
 *
 *   info                                    DPDK version, TSC rate, EAL arguments, pool setup
 *   core CASE BURST NCHUNKS CHUNK DROP_CYC REPS
 *                                           REPS samples of a core case (CASE as in bench/core.py),
 *                                           each NCHUNKS timed intervals of CHUNK loop iterations
 *   check                                   every pool holds all of its mbufs again?
 *   heap1 KIND SIZE PER_CHUNK NCHUNKS       one thread: NCHUNKS timed chunks of PER_CHUNK pairs
 *   heap2 KIND SIZE PAIRS RUNS              RUNS runs of two lcores, PAIRS pairs each, started
 *                                           together: wall time and each run's smaller CPU share
 *   quit
 *
 * KIND is "malloc" (rte_malloc + rte_free) or "zmalloc" (rte_zmalloc + rte_free).
 * Timing: `lfence; rdtsc` before and `rdtscp; lfence` after each timed interval: one free_bulk
 * call (the free-only cases, CHUNK 1) or CHUNK iterations of the loop (round trip, one at a
 * time, raw mempool).  An interval of DROP_CYC or more was preempted and is dropped (counted),
 * and the mean cost of an empty fenced pair is subtracted from each kept one -- exactly what
 * pktbuf's own loops (pktbuf/bench/core.py) do.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <rte_common.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_launch.h>
#include <rte_lcore.h>
#include <rte_malloc.h>
#include <rte_mbuf.h>
#include <rte_mbuf_pool_ops.h>
#include <rte_mempool.h>
#include <rte_pause.h>
#include <rte_version.h>

#define POOL_N     8192
#define CACHE      256
#define DATAROOM   2176          /* 2048 bytes of data + 128 of headroom, as pktbuf's pools */
#define MAX_BURST  256
#define MAX_CHUNKS (1 << 20)
#define OVH_PAIRS  10001
#define MAX_REPS   1000

static struct rte_mempool *pool_a, *pool_b, *pool_raw;
static uint64_t pair_ovh;        /* mean cycles of an empty fenced begin/end pair */
static int eal_argc;
static char **eal_argv;

static inline uint64_t tsc_begin(void)
{
	uint32_t lo, hi;

	/* lfence: everything before has finished before the counter is read */
	asm volatile("lfence\n\trdtsc" : "=a"(lo), "=d"(hi) : : "memory");
	return ((uint64_t)hi << 32) | lo;
}

static inline uint64_t tsc_end(void)
{
	uint32_t lo, hi, aux;

	/* rdtscp waits for the timed code; the lfence keeps later code from starting early */
	asm volatile("rdtscp\n\tlfence" : "=a"(lo), "=d"(hi), "=c"(aux) : : "memory");
	return ((uint64_t)hi << 32) | lo;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static int cmp_dbl(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

/* Median of v[0..n) (sorts v). */
static double median(double *v, size_t n)
{
	if (n == 0)
		return -1.0;
	qsort(v, n, sizeof(*v), cmp_dbl);
	return (n & 1) ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/*
 * The empty-pair cost: median m of OVH_PAIRS empty intervals, then the mean of those <= 4 m (an
 * interrupt inside one of them must not count).  The mean, not the median, because the counter
 * may advance in steps of several cycles; the mean is what a sum of many intervals carries.
 * pktbuf.bench.tsc.pair_overhead_cycles computes the same from its own loop.
 */
static uint64_t measure_pair_overhead(void)
{
	static uint64_t d[OVH_PAIRS];
	uint64_t sum = 0, cnt = 0, lim;

	for (int i = 0; i < OVH_PAIRS; i++) {
		uint64_t t0 = tsc_begin();
		uint64_t t1 = tsc_end();
		d[i] = t1 - t0;
	}
	qsort(d, OVH_PAIRS, sizeof(d[0]), cmp_u64);
	lim = 4 * d[OVH_PAIRS / 2];
	for (int i = 0; i < OVH_PAIRS; i++)
		if (d[i] <= lim) {
			sum += d[i];
			cnt++;
		}
	return cnt ? (sum + cnt / 2) / cnt : 0;
}

/* ---- JSON output --------------------------------------------------------------------------- */

static void json_str(const char *s)
{
	putchar('"');
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;
		if (c == '"' || c == '\\')
			printf("\\%c", c);
		else if (c < 0x20)
			printf("\\u%04x", c);
		else
			putchar(c);
	}
	putchar('"');
}

static void json_dbl_array(const char *key, const double *v, size_t n)
{
	printf(", \"%s\": [", key);
	for (size_t i = 0; i < n; i++)
		printf(i ? ", %.4f" : "%.4f", v[i]);
	putchar(']');
}

static void reply_error(const char *cmd, const char *what)
{
	printf("{\"type\": \"error\", \"cmd\": ");
	json_str(cmd);
	printf(", \"error\": ");
	json_str(what);
	printf("}\n");
	fflush(stdout);
}

/* ---- core cases ---------------------------------------------------------------------------- */

enum { L_FLAT, L_GROUPED, L_ALTERNATING, L_SHARED, L_CHAIN2 };

struct core_result {
	uint64_t acc;          /* cycles summed over the kept intervals */
	uint64_t kept, dropped;
	const char *err;
};

/* Count one timed interval: kept (summed) below drop_cyc, else dropped as preempted. */
static inline void account(struct core_result *r, uint64_t d, uint64_t drop_cyc)
{
	if (d < drop_cyc) {
		r->acc += d;
		r->kept++;
	} else {
		r->dropped++;
	}
}

/* alloc_bulk + free_bulk of n, chunk iterations per timed interval */
static struct core_result core_roundtrip(unsigned n, uint64_t nchunks, uint64_t chunk,
					 uint64_t drop_cyc)
{
	struct rte_mbuf *m[MAX_BURST];
	struct core_result r = {0, 0, 0, NULL};

	for (uint64_t c = 0; c < nchunks; c++) {
		uint64_t t0 = tsc_begin();
		for (uint64_t i = 0; i < chunk; i++) {
			if (rte_pktmbuf_alloc_bulk(pool_a, m, n) != 0) {
				r.err = "pool ran dry";
				return r;
			}
			rte_pktmbuf_free_bulk(m, n);
		}
		account(&r, tsc_end() - t0, drop_cyc);
	}
	return r;
}

/* Fill m[0..n) for one free_bulk in the given layout; *shared gets the mbuf holding a second
 * reference (L_SHARED), else NULL.  Returns 0 or -1 (pool dry / chain refused). */
static int core_prepare(int layout, unsigned n, struct rte_mbuf **m, struct rte_mbuf **tmp,
			struct rte_mbuf **shared)
{
	const unsigned h = n / 2;

	*shared = NULL;
	switch (layout) {
	case L_FLAT:
		return rte_pktmbuf_alloc_bulk(pool_a, m, n) ? -1 : 0;
	case L_GROUPED:                       /* A A .. B B .. */
		if (rte_pktmbuf_alloc_bulk(pool_a, m, h))
			return -1;
		if (rte_pktmbuf_alloc_bulk(pool_b, m + h, n - h)) {
			rte_pktmbuf_free_bulk(m, h);
			return -1;
		}
		return 0;
	case L_ALTERNATING:                   /* A B A B .. (an odd last one from B) */
		if (rte_pktmbuf_alloc_bulk(pool_a, tmp, h))
			return -1;
		if (rte_pktmbuf_alloc_bulk(pool_b, tmp + h, n - h)) {
			rte_pktmbuf_free_bulk(tmp, h);
			return -1;
		}
		for (unsigned j = 0; j < h; j++) {
			m[2 * j] = tmp[j];
			m[2 * j + 1] = tmp[h + j];
		}
		for (unsigned j = 2 * h; j < n; j++)
			m[j] = tmp[j];
		return 0;
	case L_SHARED:                        /* the middle mbuf has refcnt 2 */
		if (rte_pktmbuf_alloc_bulk(pool_a, m, n))
			return -1;
		*shared = m[h];
		rte_mbuf_refcnt_update(*shared, 1);
		return 0;
	case L_CHAIN2:                        /* n chains of 2 segments */
		if (rte_pktmbuf_alloc_bulk(pool_a, tmp, 2 * n))
			return -1;
		for (unsigned j = 0; j < n; j++) {
			if (rte_pktmbuf_chain(tmp[2 * j], tmp[2 * j + 1]) != 0) {
				rte_pktmbuf_free_bulk(tmp, 2 * n);
				return -1;
			}
			m[j] = tmp[2 * j];
		}
		return 0;
	}
	return -1;
}

/* free_bulk alone: each call one interval (the preparation is not timed) */
static struct core_result core_free_only(int layout, unsigned n, uint64_t iters, uint64_t drop_cyc)
{
	struct rte_mbuf *m[2 * MAX_BURST + 2], *tmp[2 * MAX_BURST + 2], *shared;
	struct core_result r = {0, 0, 0, NULL};

	for (uint64_t i = 0; i < iters; i++) {
		if (core_prepare(layout, n, m, tmp, &shared) != 0) {
			r.err = "pool ran dry";
			return r;
		}
		uint64_t t0 = tsc_begin();
		rte_pktmbuf_free_bulk(m, n);
		uint64_t t1 = tsc_end();
		if (shared != NULL)
			rte_pktmbuf_free(shared);        /* the last reference, untimed */
		account(&r, t1 - t0, drop_cyc);
	}
	return r;
}

/* rte_pktmbuf_alloc x n, then rte_pktmbuf_free x n, one call per mbuf */
static struct core_result core_single(unsigned n, uint64_t nchunks, uint64_t chunk,
				      uint64_t drop_cyc)
{
	struct rte_mbuf *m[MAX_BURST];
	struct core_result r = {0, 0, 0, NULL};

	for (uint64_t c = 0; c < nchunks; c++) {
		uint64_t t0 = tsc_begin();
		for (uint64_t i = 0; i < chunk; i++) {
			for (unsigned j = 0; j < n; j++) {
				m[j] = rte_pktmbuf_alloc(pool_a);
				if (m[j] == NULL) {
					if (j)
						rte_pktmbuf_free_bulk(m, j);
					r.err = "pool ran dry";
					return r;
				}
			}
			for (unsigned j = 0; j < n; j++)
				rte_pktmbuf_free(m[j]);
		}
		account(&r, tsc_end() - t0, drop_cyc);
	}
	return r;
}

/* rte_mempool_get_bulk + rte_mempool_put_bulk on the raw pool */
static struct core_result core_raw(unsigned n, uint64_t nchunks, uint64_t chunk, uint64_t drop_cyc)
{
	void *o[MAX_BURST];
	struct core_result r = {0, 0, 0, NULL};

	for (uint64_t c = 0; c < nchunks; c++) {
		uint64_t t0 = tsc_begin();
		for (uint64_t i = 0; i < chunk; i++) {
			if (rte_mempool_get_bulk(pool_raw, o, n) != 0) {
				r.err = "pool ran dry";
				return r;
			}
			rte_mempool_put_bulk(pool_raw, o, n);
		}
		account(&r, tsc_end() - t0, drop_cyc);
	}
	return r;
}

static const struct {
	const char *name;
	int layout;          /* >= 0: a free_bulk-only case */
	unsigned min_burst;
} core_cases[] = {
	{"roundtrip", -1, 1},
	{"flat", L_FLAT, 1},
	{"grouped", L_GROUPED, 2},
	{"alternating", L_ALTERNATING, 2},
	{"shared", L_SHARED, 1},
	{"chain2", L_CHAIN2, 1},
	{"single", -1, 1},
	{"raw", -1, 1},
};

static void cmd_core(const char *line)
{
	char name[32];
	unsigned burst, reps;
	uint64_t nchunks, chunk, drop_cyc, kept = 0, dropped = 0;
	double v[MAX_REPS], sorted[MAX_REPS];
	int k = -1;

	if (sscanf(line, "core %31s %u %" SCNu64 " %" SCNu64 " %" SCNu64 " %u", name, &burst,
		   &nchunks, &chunk, &drop_cyc, &reps) != 6) {
		reply_error(line, "usage: core CASE BURST NCHUNKS CHUNK DROP_CYC REPS");
		return;
	}
	for (unsigned i = 0; i < RTE_DIM(core_cases); i++)
		if (strcmp(name, core_cases[i].name) == 0)
			k = (int)i;
	if (k < 0) {
		reply_error(line, "unknown case");
		return;
	}
	if (burst < core_cases[k].min_burst || burst > MAX_BURST || nchunks < 1 || chunk < 1 ||
	    (core_cases[k].layout >= 0 && chunk != 1) || reps < 1 || reps > MAX_REPS) {
		reply_error(line, "burst, chunks or repetitions out of range");
		return;
	}
	for (unsigned rep = 0; rep < reps; rep++) {
		struct core_result r;

		if (core_cases[k].layout >= 0)
			r = core_free_only(core_cases[k].layout, burst, nchunks, drop_cyc);
		else if (strcmp(name, "roundtrip") == 0)
			r = core_roundtrip(burst, nchunks, chunk, drop_cyc);
		else if (strcmp(name, "single") == 0)
			r = core_single(burst, nchunks, chunk, drop_cyc);
		else
			r = core_raw(burst, nchunks, chunk, drop_cyc);
		if (r.err) {
			reply_error(line, r.err);
			return;
		}
		if (r.kept == 0) {
			reply_error(line, "every interval was dropped (preempted)");
			return;
		}
		v[rep] = sorted[rep] = ((double)r.acc - (double)r.kept * (double)pair_ovh) /
				       ((double)r.kept * (double)chunk * burst);
		kept += r.kept;
		dropped += r.dropped;
	}
	double med = median(sorted, reps);
	printf("{\"type\": \"core\", \"case\": \"%s\", \"burst\": %u, \"nchunks\": %" PRIu64
	       ", \"chunk\": %" PRIu64 ", \"reps\": %u, \"median_cyc\": %.4f, \"median_ns\": %.4f",
	       name, burst, nchunks, chunk, reps, med, med * 1e9 / (double)rte_get_tsc_hz());
	json_dbl_array("samples_cyc", v, reps);
	printf(", \"kept\": %" PRIu64 ", \"dropped\": %" PRIu64 "}\n", kept, dropped);
	fflush(stdout);
}

static void cmd_check(void)
{
	unsigned a = rte_mempool_avail_count(pool_a), b = rte_mempool_avail_count(pool_b);
	unsigned w = rte_mempool_avail_count(pool_raw);

	printf("{\"type\": \"check\", \"ok\": %s, \"avail\": {\"a\": %u, \"b\": %u, \"raw\": %u}, "
	       "\"n\": %u}\n", (a == POOL_N && b == POOL_N && w == POOL_N) ? "true" : "false",
	       a, b, w, POOL_N);
	fflush(stdout);
}

/* ---- heap cases ---------------------------------------------------------------------------- */

static inline void *heap_alloc(int zero, size_t size)
{
	return zero ? rte_zmalloc(NULL, size, 0) : rte_malloc(NULL, size, 0);
}

static int parse_kind(const char *s)
{
	if (strcmp(s, "malloc") == 0)
		return 0;
	if (strcmp(s, "zmalloc") == 0)
		return 1;
	return -1;
}

static void cmd_heap1(const char *line)
{
	char kind[16];
	uint64_t size, per, nch, fails = 0;
	double *v, *sorted;
	int zero;

	if (sscanf(line, "heap1 %15s %" SCNu64 " %" SCNu64 " %" SCNu64, kind, &size, &per,
		   &nch) != 4) {
		reply_error(line, "usage: heap1 KIND SIZE PER_CHUNK NCHUNKS");
		return;
	}
	zero = parse_kind(kind);
	if (zero < 0 || size < 1 || per < 1 || nch < 1 || nch > MAX_CHUNKS) {
		reply_error(line, "bad kind, size or counts");
		return;
	}
	v = malloc(2 * nch * sizeof(*v));
	if (v == NULL) {
		reply_error(line, "out of memory");
		return;
	}
	sorted = v + nch;
	for (uint64_t c = 0; c < nch; c++) {
		uint64_t t0 = tsc_begin();
		for (uint64_t i = 0; i < per; i++) {
			void *p = heap_alloc(zero, size);
			if (p == NULL) {
				fails++;
				continue;
			}
			/* the block escapes: the compiler may not fold the pair away */
			asm volatile("" : : "r"(p) : "memory");
			rte_free(p);
		}
		v[c] = sorted[c] = (double)(tsc_end() - t0) / (double)per;
	}
	double med = median(sorted, nch);
	printf("{\"type\": \"heap1\", \"kind\": \"%s\", \"size\": %" PRIu64 ", \"per_chunk\": %" PRIu64
	       ", \"chunks\": %" PRIu64 ", \"fails\": %" PRIu64 ", \"median_cyc\": %.4f"
	       ", \"median_ns\": %.4f", kind, size, per, nch, fails, med,
	       med * 1e9 / (double)rte_get_tsc_hz());
	json_dbl_array("samples_cyc", v, nch);
	printf("}\n");
	fflush(stdout);
	free(v);
}

struct heap2_arg {
	int zero;
	size_t size;
	uint64_t pairs, fails;
	double share;        /* this thread's CPU time / its elapsed time */
};

static uint32_t gate;

static uint64_t now_ns(clockid_t clk)
{
	struct timespec ts;

	clock_gettime(clk, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int heap2_thread(void *p)
{
	struct heap2_arg *a = p;
	uint64_t c0 = now_ns(CLOCK_THREAD_CPUTIME_ID), w0 = now_ns(CLOCK_MONOTONIC);

	/* the gate: both threads start their loops together */
	__atomic_fetch_add(&gate, 1, __ATOMIC_SEQ_CST);
	while (__atomic_load_n(&gate, __ATOMIC_ACQUIRE) < 2)
		rte_pause();
	for (uint64_t i = 0; i < a->pairs; i++) {
		void *q = heap_alloc(a->zero, a->size);
		if (q == NULL) {
			a->fails++;
			continue;
		}
		asm volatile("" : : "r"(q) : "memory");
		rte_free(q);
	}
	uint64_t w1 = now_ns(CLOCK_MONOTONIC), c1 = now_ns(CLOCK_THREAD_CPUTIME_ID);
	a->share = (double)(c1 - c0) / (double)(w1 > w0 ? w1 - w0 : 1);
	return 0;
}

static void cmd_heap2(const char *line)
{
	char kind[16];
	uint64_t size, pairs, fails = 0;
	double wall[MAX_REPS], share[MAX_REPS], sorted[MAX_REPS];
	struct heap2_arg a[2];
	unsigned worker, runs;
	int zero;

	if (sscanf(line, "heap2 %15s %" SCNu64 " %" SCNu64 " %u", kind, &size, &pairs, &runs) != 4) {
		reply_error(line, "usage: heap2 KIND SIZE PAIRS RUNS");
		return;
	}
	zero = parse_kind(kind);
	if (zero < 0 || size < 1 || pairs < 1 || runs < 1 || runs > MAX_REPS) {
		reply_error(line, "bad kind, size or counts");
		return;
	}
	worker = rte_get_next_lcore(-1, 1, 0);
	if (worker >= RTE_MAX_LCORE) {
		reply_error(line, "two threads need a second lcore");
		return;
	}
	for (unsigned r = 0; r < runs; r++) {
		for (int t = 0; t < 2; t++)
			a[t] = (struct heap2_arg){zero, size, pairs, 0, 0.0};
		__atomic_store_n(&gate, 0, __ATOMIC_SEQ_CST);
		uint64_t w0 = now_ns(CLOCK_MONOTONIC);
		if (rte_eal_remote_launch(heap2_thread, &a[1], worker) != 0) {
			reply_error(line, "rte_eal_remote_launch failed");
			return;
		}
		heap2_thread(&a[0]);
		rte_eal_wait_lcore(worker);
		uint64_t w1 = now_ns(CLOCK_MONOTONIC);
		wall[r] = sorted[r] = (double)(w1 - w0);
		share[r] = RTE_MIN(a[0].share, a[1].share);
		fails += a[0].fails + a[1].fails;
	}
	printf("{\"type\": \"heap2\", \"kind\": \"%s\", \"size\": %" PRIu64 ", \"pairs\": %" PRIu64
	       ", \"runs\": %u, \"fails\": %" PRIu64 ", \"median_wall_ns\": %.1f", kind, size, pairs,
	       runs, fails, median(sorted, runs));
	json_dbl_array("wall_ns", wall, runs);
	json_dbl_array("share", share, runs);
	printf("}\n");
	fflush(stdout);
}

/* ---- setup and the command loop ------------------------------------------------------------ */

static void cmd_info(void)
{
	struct rte_mempool_cache *c = rte_mempool_default_cache(pool_a, rte_lcore_id());

	printf("{\"type\": \"info\", \"dpdk\": ");
	json_str(rte_version());
	printf(", \"tsc_hz\": %" PRIu64 ", \"tsc_pair_cyc\": %" PRIu64 ", \"lcores\": %u"
	       ", \"hugepages\": %s, \"mempool_ops\": ", rte_get_tsc_hz(), pair_ovh,
	       rte_lcore_count(), rte_eal_has_hugepages() ? "true" : "false");
	json_str(rte_mbuf_best_mempool_ops());
	printf(", \"pool_n\": %u, \"cache\": %u, \"cache_flushthresh\": %u, \"dataroom\": %u"
	       ", \"eal_args\": [", POOL_N, CACHE, c ? c->flushthresh : 0, DATAROOM);
	for (int i = 1; i < eal_argc; i++) {
		if (i > 1)
			printf(", ");
		json_str(eal_argv[i]);
	}
	printf("]}\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	char line[256];
	int ret;

	eal_argc = argc;
	eal_argv = argv;
	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			eal_argc = i;
			break;
		}
	ret = rte_eal_init(argc, argv);
	if (ret < 0) {
		fprintf(stderr, "dpdk_ref: rte_eal_init failed: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	pool_a = rte_pktmbuf_pool_create("ref_a", POOL_N, CACHE, 0, DATAROOM, SOCKET_ID_ANY);
	pool_b = rte_pktmbuf_pool_create("ref_b", POOL_N, CACHE, 0, DATAROOM, SOCKET_ID_ANY);
	pool_raw = rte_pktmbuf_pool_create("ref_raw", POOL_N, CACHE, 0, DATAROOM, SOCKET_ID_ANY);
	if (pool_a == NULL || pool_b == NULL || pool_raw == NULL) {
		fprintf(stderr, "dpdk_ref: rte_pktmbuf_pool_create failed: %s\n",
			rte_strerror(rte_errno));
		rte_eal_cleanup();
		return 1;
	}
	pair_ovh = measure_pair_overhead();
	printf("{\"type\": \"ready\"}\n");
	fflush(stdout);

	while (fgets(line, sizeof(line), stdin) != NULL) {
		line[strcspn(line, "\r\n")] = 0;
		if (line[0] == 0)
			continue;
		if (strcmp(line, "quit") == 0)
			break;
		else if (strcmp(line, "info") == 0)
			cmd_info();
		else if (strcmp(line, "check") == 0)
			cmd_check();
		else if (strncmp(line, "core ", 5) == 0)
			cmd_core(line);
		else if (strncmp(line, "heap1 ", 6) == 0)
			cmd_heap1(line);
		else if (strncmp(line, "heap2 ", 6) == 0)
			cmd_heap2(line);
		else
			reply_error(line, "unknown command");
	}
	rte_mempool_free(pool_a);
	rte_mempool_free(pool_b);
	rte_mempool_free(pool_raw);
	rte_eal_cleanup();
	return 0;
}
