/*
 * rss_ref.c -- the DPDK side of `pktbuf bench rss`: DPDK 22.11's software Toeplitz hash.
 *
 * Built on demand by pktbuf/bench/dpdk_ref.py (same compiler flags as dpdk_ref.c: -O3 plus
 * pkg-config libdpdk, which carries -march=native) and driven over a pipe in the same way: one
 * command per line on stdin, one JSON object per line on stdout.
 *
 *   info                             DPDK version, TSC rate, empty-pair cost, GFNI support
 *                                    (and what is missing when there is none)
 *   rss KIND NTUPLES NCHUNKS CHUNK DROP_CYC REPS
 *                                    REPS samples; each NCHUNKS timed intervals of CHUNK bulks
 *                                    of 32 IPv4/UDP tuples (12 bytes), taken in turn from
 *                                    NTUPLES tuples; KIND: softrss, softrss_be or gfni
 *   quit
 *
 * The tuples are the ones pktbuf/bench/rss.py makes: splitmix64 from seed 1, two outputs per
 * tuple -- x gives src (x >> 32) and dst (low 32 bits), y gives sport (y >> 48) and dport
 * (bits 32..47).  rte_softrss takes them as host-order words (rte_ipv4_tuple), GFNI as
 * network-order bytes.  Each answer carries "check", the XOR of the hashes of all NTUPLES
 * tuples, which pktbuf compares with its own.  Timing: fenced TSC reads around each interval;
 * an interval of DROP_CYC or more was preempted and is dropped; the mean empty-pair cost is
 * subtracted -- as in dpdk_ref.c and pktbuf/bench/core.py.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_common.h>
#include <rte_cpuflags.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_thash.h>
#include <rte_thash_gfni.h>
#include <rte_version.h>

#define BULK       32
#define MAX_TUPLES (1 << 16)
#define MAX_REPS   1000
#define OVH_PAIRS  10001

static const uint8_t default_rss_key[40] = {
	0x6d, 0x5a, 0x56, 0xda, 0x25, 0x5b, 0x0e, 0xc2, 0x41, 0x67, 0x25, 0x3d, 0x43, 0xa3,
	0x8f, 0xb0, 0xd0, 0xca, 0x2b, 0xcb, 0xae, 0x7b, 0x30, 0xb4, 0x77, 0xcb, 0x2d, 0xa3,
	0x80, 0x30, 0xf2, 0x0c, 0x6a, 0x42, 0xb7, 0x3b, 0xbe, 0xac, 0x01, 0xfa,
};
static uint32_t key_be[10];
static uint64_t gfni_mtrx[40];
static int gfni_ok;
static const char *gfni_why = "";
static union rte_thash_tuple words[MAX_TUPLES];
static uint8_t bytes[MAX_TUPLES][12];
static uint8_t *bptr[MAX_TUPLES];
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

static void make_tuples(unsigned n)
{
	uint64_t s = 1;

	for (unsigned k = 0; k < n; k++) {
		uint64_t x = splitmix64(&s), y = splitmix64(&s);
		uint32_t w[3] = {(uint32_t)(x >> 32), (uint32_t)x, (uint32_t)(y >> 32)};

		memset(&words[k], 0, sizeof(words[k]));
		words[k].v4.src_addr = w[0];
		words[k].v4.dst_addr = w[1];
		words[k].v4.sport = (uint16_t)(w[2] >> 16);
		words[k].v4.dport = (uint16_t)w[2];
		for (int i = 0; i < 3; i++) {
			uint32_t be = rte_cpu_to_be_32(w[i]);
			memcpy(bytes[k] + 4 * i, &be, 4);
		}
		bptr[k] = bytes[k];
	}
}

/* one bulk of 32 tuples from tuple `first` on; the hashes go to out */
static inline void hash_bulk(int kind, unsigned first, uint32_t *out)
{
	if (kind == 0) {
		for (unsigned i = 0; i < BULK; i++)
			out[i] = rte_softrss((uint32_t *)&words[first + i], RTE_THASH_V4_L4_LEN,
					     default_rss_key);
	} else if (kind == 1) {
		for (unsigned i = 0; i < BULK; i++)
			out[i] = rte_softrss_be((uint32_t *)&words[first + i], RTE_THASH_V4_L4_LEN,
						(const uint8_t *)key_be);
	} else {
		rte_thash_gfni_bulk(gfni_mtrx, 12, &bptr[first], out, BULK);
	}
}

static void reply_error(const char *cmd, const char *what)
{
	printf("{\"type\": \"error\", \"cmd\": \"%s\", \"error\": \"%s\"}\n", cmd, what);
	fflush(stdout);
}

static void cmd_rss(const char *line)
{
	static const char *kinds[] = {"softrss", "softrss_be", "gfni"};
	char name[32];
	unsigned ntuples, reps;
	uint64_t nchunks, chunk, drop_cyc, kept = 0, dropped = 0;
	double v[MAX_REPS];
	uint32_t out[BULK], sink = 0, check = 0;
	int kind = -1;

	if (sscanf(line, "rss %31s %u %" SCNu64 " %" SCNu64 " %" SCNu64 " %u", name, &ntuples,
		   &nchunks, &chunk, &drop_cyc, &reps) != 6) {
		reply_error("rss", "usage: rss KIND NTUPLES NCHUNKS CHUNK DROP_CYC REPS");
		return;
	}
	for (int i = 0; i < 3; i++)
		if (strcmp(name, kinds[i]) == 0)
			kind = i;
	if (kind < 0 || ntuples < BULK || ntuples % BULK || ntuples > MAX_TUPLES || nchunks < 1 ||
	    chunk < 1 || reps < 1 || reps > MAX_REPS) {
		reply_error("rss", "bad kind or counts");
		return;
	}
	if (kind == 2 && !gfni_ok) {
		reply_error("rss", "no GFNI on this CPU or in this build");
		return;
	}
	make_tuples(ntuples);
	for (unsigned f = 0; f < ntuples; f += BULK) {
		hash_bulk(kind, f, out);
		for (unsigned i = 0; i < BULK; i++)
			check ^= out[i];
	}
	for (unsigned rep = 0; rep < reps; rep++) {
		uint64_t acc = 0, k = 0, d = 0;
		unsigned first = 0;

		for (uint64_t c = 0; c < nchunks; c++) {
			uint64_t t0 = tsc_begin();
			for (uint64_t it = 0; it < chunk; it++) {
				hash_bulk(kind, first, out);
				sink ^= out[it & (BULK - 1)];
				first += BULK;
				if (first == ntuples)
					first = 0;
			}
			uint64_t dt = tsc_end() - t0;
			if (dt < drop_cyc) {
				acc += dt;
				k++;
			} else {
				d++;
			}
		}
		if (k == 0) {
			reply_error("rss", "every interval was dropped (preempted)");
			return;
		}
		v[rep] = ((double)acc - (double)k * (double)pair_ovh) / ((double)k * chunk * BULK);
		kept += k;
		dropped += d;
	}
	printf("{\"type\": \"rss\", \"kind\": \"%s\", \"ntuples\": %u, \"nchunks\": %" PRIu64
	       ", \"chunk\": %" PRIu64 ", \"reps\": %u, \"check\": %" PRIu32 ", \"sink\": %" PRIu32
	       ", \"samples_cyc\": [", name, ntuples, nchunks, chunk, reps, check, sink);
	for (unsigned i = 0; i < reps; i++)
		printf(i ? ", %.4f" : "%.4f", v[i]);
	printf("], \"kept\": %" PRIu64 ", \"dropped\": %" PRIu64 "}\n", kept, dropped);
	fflush(stdout);
}

/*
 * Whether rte_thash_gfni_bulk runs here.  Not rte_thash_gfni_supported(): that function is
 * compiled into Debian's librte_hash without -mgfni, so it answers 0 on every CPU, and it also
 * wants EAL's SIMD limit raised to 512 bits.  The inline bulk function in the header is what
 * this program calls, so what counts is that this build defines it (-march=native on a CPU
 * with GFNI and AVX-512) and that the CPU has the instructions it uses.
 */
static int gfni_usable(const char **why)
{
#ifdef RTE_THASH_GFNI_DEFINED
	static const enum rte_cpu_flag_t need[] = {RTE_CPUFLAG_GFNI, RTE_CPUFLAG_AVX512F,
						   RTE_CPUFLAG_AVX512BW, RTE_CPUFLAG_AVX512VBMI};
	static const char *names[] = {"GFNI", "AVX512F", "AVX512BW", "AVX512VBMI"};

	for (unsigned i = 0; i < RTE_DIM(need); i++)
		if (rte_cpu_get_flag_enabled(need[i]) <= 0) {
			*why = names[i];
			return 0;
		}
	return 1;
#else
	*why = "not compiled in (no __GFNI__ and __AVX512F__ with -march=native)";
	return 0;
#endif
}

static void cmd_info(int eal_argc, char **argv)
{
	printf("{\"type\": \"info\", \"dpdk\": \"%s\", \"tsc_hz\": %" PRIu64
	       ", \"tsc_pair_cyc\": %" PRIu64 ", \"gfni\": %s, \"gfni_missing\": \"%s\", \"eal_args\": [",
	       rte_version(), rte_get_tsc_hz(), pair_ovh, gfni_ok ? "true" : "false", gfni_why);
	for (int i = 1; i < eal_argc; i++)
		printf(i > 1 ? ", \"%s\"" : "\"%s\"", argv[i]);
	printf("]}\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	char line[256];
	int eal_argc = argc;

	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			eal_argc = i;
			break;
		}
	if (rte_eal_init(argc, argv) < 0) {
		fprintf(stderr, "rss_ref: rte_eal_init failed: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	rte_convert_rss_key((const uint32_t *)default_rss_key, key_be, sizeof(default_rss_key));
	gfni_ok = gfni_usable(&gfni_why);
	if (gfni_ok)
		rte_thash_complete_matrix(gfni_mtrx, default_rss_key, sizeof(default_rss_key));
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
			cmd_info(eal_argc, argv);
		else if (strncmp(line, "rss ", 4) == 0)
			cmd_rss(line);
		else
			reply_error("?", "unknown command");
	}
	rte_eal_cleanup();
	return 0;
}
