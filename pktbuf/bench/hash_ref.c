/*
 * hash_ref.c -- the DPDK side of `python -m pktbuf.bench.hash`: DPDK 22.11's rte_hash
 * (cuckoo, CRC32-C hash) with 16-byte keys.
 *
 * Built on demand by pktbuf/bench/hash.py through pktbuf/bench/dpdk_ref.py's build helper
 * (-O3 plus pkg-config libdpdk, -march=native) and driven over a pipe: one command per line
 * on stdin, one JSON object per line on stdout.
 *
 *   info                               DPDK version, TSC rate, empty fenced-pair cost
 *   build ENTRIES NKEYS FLAGS SEED     a new table (entries, rte_hash_crc, init 0, key_len 16,
 *                                      extra_flag FLAGS) filled with keys 0 .. NKEYS-1, data =
 *                                      the key's index (rte_hash_add_key_data); the cycles per
 *                                      add, the number of failed adds, and table_bytes: what
 *                                      the table holds of EAL's heap after the adds (the
 *                                      growth of rte_malloc_get_socket_stats' allocated bytes
 *                                      on socket 0 from before rte_hash_create)
 *   stream NLOOK SEED                  the lookup stream (below) and its checksums: over all
 *                                      NLOOK lookups in bulks of 32, the hits, the sum of
 *                                      position + 1 of the hits (lookup_bulk) and the sum of
 *                                      their data (lookup_bulk_data)
 *   sample KIND NCHUNKS CHUNK DROP REPS
 *                                      REPS samples of cycles per key: NCHUNKS timed intervals
 *                                      of CHUNK bursts of 32 lookups taken in turn from the
 *                                      stream; KIND bulk (rte_hash_lookup_bulk), bulk_data
 *                                      (rte_hash_lookup_bulk_data) or single (32 calls of
 *                                      rte_hash_lookup per burst)
 *   adddel NDEL REPS                   REPS samples: delete NDEL consecutive keys (each
 *                                      rte_hash_del_key, then rte_hash_free_key_with_position
 *                                      when the table has RW_CONCURRENCY_LF), then add them
 *                                      back with their data; cycles per delete and per add
 *   quit
 *
 * Keys (pktbuf/bench/hash.py makes the same ones): splitmix64 from SEED, two outputs per key,
 * each stored little-endian: key i = out[2i] | out[2i+1].  Keys 0 .. NKEYS-1 are added; keys
 * NKEYS .. 2*NKEYS-1 are the misses.  Lookup j of the stream: r = output j of splitmix64 from
 * the stream's SEED; r & 1 picks hit or miss, (r >> 1) % NKEYS the key.  Timing as dpdk_ref.c:
 * fenced TSC reads around each interval, an interval of DROP cycles or more is dropped as
 * preempted, the mean empty-pair cost is subtracted.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_hash.h>
#include <rte_hash_crc.h>
#include <rte_malloc.h>
#include <rte_version.h>

#define KEY_LEN   16
#define BURST     32
#define MAX_REPS  1000
#define OVH_PAIRS 10001

static struct rte_hash *tbl;
static uint8_t (*keys)[KEY_LEN];     /* 2 * nkeys keys: the added ones, then the misses */
static uint8_t (*stream)[KEY_LEN];
static uint64_t nkeys, nlook, pos_in_stream, del_from;
static int lf;
static uint64_t pair_ovh;

static inline uint64_t tsc_begin(void)
{
	uint32_t lo, hi;

	asm volatile("lfence\n\trdtsc" : "=a"(lo), "=d"(hi) : : "memory");
	return ((uint64_t)hi << 32) | lo;
}

static inline uint64_t tsc_end(void)
{
	uint32_t lo, hi, aux;

	asm volatile("rdtscp\n\tlfence" : "=a"(lo), "=d"(hi), "=c"(aux) : : "memory");
	return ((uint64_t)hi << 32) | lo;
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static uint64_t measure_pair_overhead(void)
{
	static uint64_t d[OVH_PAIRS];
	uint64_t sum = 0, cnt = 0, lim;

	for (int i = 0; i < OVH_PAIRS; i++) {
		uint64_t t0 = tsc_begin();
		d[i] = tsc_end() - t0;
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

static uint64_t splitmix64(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

static void reply_error(const char *cmd, const char *what)
{
	printf("{\"type\": \"error\", \"cmd\": \"%s\", \"error\": \"%s\"}\n", cmd, what);
	fflush(stdout);
}

static void cmd_build(const char *line)
{
	uint64_t entries, n, seed, s, failed = 0, t0, dt;
	struct rte_malloc_socket_stats m0, m1;
	unsigned flags;
	char name[RTE_HASH_NAMESIZE];

	if (sscanf(line, "build %" SCNu64 " %" SCNu64 " %u %" SCNu64, &entries, &n, &flags,
		   &seed) != 4 || n < 1 || n > entries) {
		reply_error("build", "usage: build ENTRIES NKEYS FLAGS SEED (1 <= NKEYS <= ENTRIES)");
		return;
	}
	if (tbl != NULL)
		rte_hash_free(tbl);
	free(keys);
	keys = malloc(2 * n * KEY_LEN);
	if (keys == NULL) {
		reply_error("build", "no memory for the keys");
		return;
	}
	s = seed;
	for (uint64_t i = 0; i < 2 * n; i++) {
		uint64_t a = splitmix64(&s), b = splitmix64(&s);

		memcpy(keys[i], &a, 8);           /* little-endian machine */
		memcpy(keys[i] + 8, &b, 8);
	}
	snprintf(name, sizeof(name), "bench_%" PRIu64, entries);
	struct rte_hash_parameters p = {
		.name = name, .entries = (uint32_t)entries, .key_len = KEY_LEN,
		.hash_func = rte_hash_crc, .hash_func_init_val = 0, .socket_id = 0,
		.extra_flag = (uint8_t)flags,
	};
	if (rte_malloc_get_socket_stats(0, &m0) != 0) {
		reply_error("build", "no heap statistics for socket 0");
		return;
	}
	tbl = rte_hash_create(&p);
	if (tbl == NULL) {
		reply_error("build", rte_strerror(rte_errno));
		return;
	}
	nkeys = n;
	lf = (flags & RTE_HASH_EXTRA_FLAGS_RW_CONCURRENCY_LF) != 0;
	t0 = tsc_begin();
	for (uint64_t i = 0; i < n; i++)
		if (rte_hash_add_key_data(tbl, keys[i], (void *)(uintptr_t)i) < 0)
			failed++;
	dt = tsc_end() - t0;
	del_from = 0;
	if (rte_malloc_get_socket_stats(0, &m1) != 0) {
		reply_error("build", "no heap statistics for socket 0");
		return;
	}
	printf("{\"type\": \"build\", \"added\": %" PRIu64 ", \"failed\": %" PRIu64
	       ", \"count\": %d, \"add_cyc\": %.3f, \"table_bytes\": %zu}\n", n - failed, failed,
	       rte_hash_count(tbl), (double)(dt - pair_ovh) / n,
	       m1.heap_allocsz_bytes - m0.heap_allocsz_bytes);
	fflush(stdout);
}

static void cmd_stream(const char *line)
{
	uint64_t seed, s, hits = 0, possum = 0, datasum = 0, dhits = 0;
	int32_t pos[BURST];
	const void *kp[BURST];
	void *data[BURST];

	if (tbl == NULL || sscanf(line, "stream %" SCNu64 " %" SCNu64, &nlook, &seed) != 2 ||
	    nlook < BURST || nlook % BURST) {
		reply_error("stream", "usage: stream NLOOK SEED (a multiple of 32; after build)");
		return;
	}
	free(stream);
	stream = malloc(nlook * KEY_LEN);
	if (stream == NULL) {
		reply_error("stream", "no memory for the stream");
		return;
	}
	s = seed;
	for (uint64_t j = 0; j < nlook; j++) {
		uint64_t r = splitmix64(&s), k = (r >> 1) % nkeys;

		memcpy(stream[j], keys[(r & 1) ? k : nkeys + k], KEY_LEN);
	}
	for (uint64_t j = 0; j < nlook; j += BURST) {
		uint64_t mask = 0;

		for (int i = 0; i < BURST; i++)
			kp[i] = stream[j + i];
		rte_hash_lookup_bulk(tbl, kp, BURST, pos);
		for (int i = 0; i < BURST; i++)
			if (pos[i] >= 0) {
				hits++;
				possum += (uint64_t)pos[i] + 1;
			}
		dhits += rte_hash_lookup_bulk_data(tbl, kp, BURST, &mask, data);
		for (int i = 0; i < BURST; i++)
			if (mask & (1ULL << i))
				datasum += (uintptr_t)data[i];
	}
	pos_in_stream = 0;
	printf("{\"type\": \"stream\", \"hits\": %" PRIu64 ", \"possum\": %" PRIu64
	       ", \"data_hits\": %" PRIu64 ", \"datasum\": %" PRIu64 "}\n", hits, possum, dhits,
	       datasum);
	fflush(stdout);
}

/* one burst of 32 lookups from the stream; returns something that depends on every result */
static inline int64_t burst(int kind)
{
	const void *kp[BURST];
	int32_t pos[BURST];
	void *data[BURST];
	uint64_t mask = 0;
	int64_t r = 0;

	for (int i = 0; i < BURST; i++)
		kp[i] = stream[pos_in_stream + i];
	pos_in_stream += BURST;
	if (pos_in_stream == nlook)
		pos_in_stream = 0;
	if (kind == 0) {
		rte_hash_lookup_bulk(tbl, kp, BURST, pos);
		for (int i = 0; i < BURST; i++)
			r += pos[i];
	} else if (kind == 1) {
		r = rte_hash_lookup_bulk_data(tbl, kp, BURST, &mask, data);
		r += (int64_t)mask;
	} else {
		for (int i = 0; i < BURST; i++)
			r += rte_hash_lookup(tbl, kp[i]);
	}
	return r;
}

static void cmd_sample(const char *line)
{
	static const char *kinds[] = {"bulk", "bulk_data", "single"};
	char name[32];
	unsigned reps;
	uint64_t nchunks, chunk, drop_cyc, kept = 0, dropped = 0;
	double v[MAX_REPS];
	int64_t sink = 0;
	int kind = -1;

	if (stream == NULL ||
	    sscanf(line, "sample %31s %" SCNu64 " %" SCNu64 " %" SCNu64 " %u", name, &nchunks,
		   &chunk, &drop_cyc, &reps) != 5) {
		reply_error("sample", "usage: sample KIND NCHUNKS CHUNK DROP_CYC REPS (after stream)");
		return;
	}
	for (int i = 0; i < 3; i++)
		if (strcmp(name, kinds[i]) == 0)
			kind = i;
	if (kind < 0 || nchunks < 1 || chunk < 1 || reps < 1 || reps > MAX_REPS) {
		reply_error("sample", "bad kind or counts");
		return;
	}
	for (unsigned rep = 0; rep < reps; rep++) {
		uint64_t acc = 0, k = 0, d = 0;

		for (uint64_t c = 0; c < nchunks; c++) {
			uint64_t t0 = tsc_begin();

			for (uint64_t it = 0; it < chunk; it++)
				sink += burst(kind);
			uint64_t dt = tsc_end() - t0;

			if (dt < drop_cyc) {
				acc += dt;
				k++;
			} else {
				d++;
			}
		}
		v[rep] = k ? ((double)acc - (double)k * pair_ovh) / ((double)k * chunk * BURST) : -1;
		kept += k;
		dropped += d;
	}
	printf("{\"type\": \"sample\", \"kind\": \"%s\", \"samples_cyc\": [", name);
	for (unsigned rep = 0; rep < reps; rep++)
		printf("%s%.4f", rep ? ", " : "", v[rep]);
	printf("], \"kept\": %" PRIu64 ", \"dropped\": %" PRIu64 ", \"sink\": %" PRId64 "}\n",
	       kept, dropped, sink);
	fflush(stdout);
}

static void cmd_adddel(const char *line)
{
	uint64_t ndel;
	unsigned reps;
	double vd[MAX_REPS], va[MAX_REPS];
	uint64_t fails = 0;

	if (tbl == NULL || sscanf(line, "adddel %" SCNu64 " %u", &ndel, &reps) != 2 || ndel < 1 ||
	    ndel > nkeys || reps < 1 || reps > MAX_REPS) {
		reply_error("adddel", "usage: adddel NDEL REPS (after build)");
		return;
	}
	for (unsigned rep = 0; rep < reps; rep++) {
		uint64_t t0, dt;

		if (del_from + ndel > nkeys)
			del_from = 0;
		t0 = tsc_begin();
		for (uint64_t i = del_from; i < del_from + ndel; i++) {
			int32_t p = rte_hash_del_key(tbl, keys[i]);

			if (p < 0)
				fails++;
			else if (lf)
				rte_hash_free_key_with_position(tbl, p);
		}
		dt = tsc_end() - t0;
		vd[rep] = ((double)dt - pair_ovh) / ndel;
		t0 = tsc_begin();
		for (uint64_t i = del_from; i < del_from + ndel; i++)
			if (rte_hash_add_key_data(tbl, keys[i], (void *)(uintptr_t)i) < 0)
				fails++;
		dt = tsc_end() - t0;
		va[rep] = ((double)dt - pair_ovh) / ndel;
		del_from += ndel;
	}
	printf("{\"type\": \"adddel\", \"del_cyc\": [");
	for (unsigned rep = 0; rep < reps; rep++)
		printf("%s%.4f", rep ? ", " : "", vd[rep]);
	printf("], \"add_cyc\": [");
	for (unsigned rep = 0; rep < reps; rep++)
		printf("%s%.4f", rep ? ", " : "", va[rep]);
	printf("], \"fails\": %" PRIu64 ", \"count\": %d}\n", fails, rte_hash_count(tbl));
	fflush(stdout);
}

int main(int argc, char **argv)
{
	char line[512];
	int ret = rte_eal_init(argc, argv);

	if (ret < 0) {
		fprintf(stderr, "rte_eal_init failed: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	pair_ovh = measure_pair_overhead();
	printf("{\"type\": \"ready\"}\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin) != NULL) {
		line[strcspn(line, "\r\n")] = 0;
		if (strcmp(line, "info") == 0) {
			printf("{\"type\": \"info\", \"dpdk\": \"%s\", \"tsc_hz\": %" PRIu64
			       ", \"pair_ovh\": %" PRIu64 "}\n", rte_version(), rte_get_tsc_hz(),
			       pair_ovh);
			fflush(stdout);
		} else if (strncmp(line, "build ", 6) == 0) {
			cmd_build(line);
		} else if (strncmp(line, "stream ", 7) == 0) {
			cmd_stream(line);
		} else if (strncmp(line, "sample ", 7) == 0) {
			cmd_sample(line);
		} else if (strncmp(line, "adddel ", 7) == 0) {
			cmd_adddel(line);
		} else if (strcmp(line, "quit") == 0) {
			break;
		} else {
			reply_error(line, "unknown command");
		}
	}
	if (tbl != NULL)
		rte_hash_free(tbl);
	rte_eal_cleanup();
	return 0;
}
