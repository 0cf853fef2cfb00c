/*
 * lpm_ref.c -- the DPDK side of pktbuf's LPM benchmark (pktbuf/bench/lpm.py): DPDK 22.11's
 * rte_lpm over lpm_perf_autotest's route set.
 *
 * Built on demand by pktbuf/bench/dpdk_ref.py's build() (-O3 plus pkg-config libdpdk) and
 * driven over a pipe like dpdk_ref.c: one command per line on stdin, one JSON object per line
 * on stdout.
 *
 *   info                          DPDK version, TSC rate
 *   create MAX_RULES NTBL8 STRIDE make the table (freeing any previous one) and the route set:
 *                                 every STRIDE-th route of the generator below
 *   add                           add every route in order, next hop = its position in the
 *                                 set; cycles in total, return-code counts, FNV-1a-64 of tbl24
 *                                 and tbl8 (the raw words) afterwards
 *   lookup KIND NBATCH SEED       NBATCH timed batches of 4096 addresses (KIND: single, bulk,
 *                                 x4); the addresses are the low 32 bits of splitmix64 outputs
 *                                 from SEED, made outside the timed region; answers cycles per
 *                                 lookup, misses and a check value over every result
 *   delete                        delete every route in order; cycles, counts, FNV afterwards
 *   dump PATH                     write tbl24 then every tbl8 group, raw 32-bit words, to PATH
 *                                 (to find where two tables that should be equal differ)
 *   quit
 *
 * The route generator is lpm_perf_autotest's (app/test/test_lpm_perf.c, 22.11) restated: the
 * per-depth counts of its rule_count table, an lrand48 recurrence starting from the all-zero
 * state glibc has when nobody seeded it (computed here, so nothing else in the process can
 * disturb it), then five fixed rules each put at a pseudo-random position.  pktbuf/bench/lpm.py
 * implements the same generator; both report its FNV-1a-64 so that a difference shows.
 * Timing: `lfence; rdtsc` ... `rdtscp; lfence` around each batch (or around the whole add or
 * delete loop, as lpm_perf does).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_common.h>
#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_errno.h>
#include <rte_ip.h>
#include <rte_lpm.h>
#include <rte_version.h>

#define BATCH      4096
#define BULK       32
#define MAX_ROUTES (1 << 21)

static const uint32_t cnt_a[32] = {0, 0, 1, 0, 2, 1, 3, 185, 26, 16, 39, 144, 233, 528, 866,
	3856, 3268, 5662, 17301, 22226, 11147, 16746, 17120, 77578, 401, 656, 1107, 1121, 2316,
	717, 10, 66};
static const uint32_t cnt_b[32] = {0, 0, 0, 0, 1, 1, 1, 3, 3, 30, 25, 168, 305, 569, 1129,
	50800, 1645, 1820, 3506, 3258, 3424, 4971, 6885, 39771, 424, 170, 433, 92, 366, 377, 2,
	200};
static const uint32_t cnt_c[32] = {0, 0, 0, 0, 0, 0, 0, 12, 8, 9, 33, 69, 237, 1007, 1717,
	14663, 8070, 16185, 48261, 36870, 33960, 50638, 61422, 466549, 1829, 4824, 4927, 5914,
	10254, 4905, 1, 716};

static uint32_t all_ip[MAX_ROUTES];
static uint8_t all_depth[MAX_ROUTES];
static uint32_t n_all;
static uint32_t *r_ip;
static uint8_t *r_depth;
static uint32_t n_routes;
static struct rte_lpm *lpm;
static uint32_t cfg_tbl8s;
static uint64_t lcg;            /* lrand48 state, 48 bits */

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

static uint32_t next_lrand48(void)
{
	lcg = (0x5DEECE66DULL * lcg + 0xB) & ((1ULL << 48) - 1);
	return (uint32_t)(lcg >> 17);
}

static void gen_class(const uint32_t *cnt, uint32_t fixed, uint32_t head)
{
	for (uint32_t depth = 1; depth <= 32; depth++) {
		uint32_t n = cnt[depth - 1];
		if (n == 0)
			continue;
		uint32_t range = 1u << (depth - fixed), mask = range - 1;
		uint32_t step = range <= n ? 1 : (uint32_t)((double)range / n + 0.5)  /* C round(), x > 0 */;
		uint32_t start = next_lrand48() & mask;
		for (uint32_t k = 0; k < n; k++) {
			all_ip[n_all] = (start << (32 - depth)) | head;
			all_depth[n_all++] = (uint8_t)depth;
			start = (start + step) & mask;
		}
	}
}

static void insert_random_pos(uint32_t ip, uint8_t depth)
{
	uint32_t pos;
	int tries = 0;

	do {
		pos = next_lrand48();
		tries++;
	} while (tries < 10 && pos > n_all);
	if (pos > n_all)
		pos = n_all >> 1;
	all_ip[n_all] = all_ip[pos];
	all_depth[n_all++] = all_depth[pos];
	all_ip[pos] = ip;
	all_depth[pos] = depth;
}

static void generate(void)
{
	lcg = 0;
	n_all = 0;
	gen_class(cnt_a, 1, 0x00000000u);
	gen_class(cnt_b, 2, 0x80000000u);
	gen_class(cnt_c, 3, 0xC0000000u);
	insert_random_pos(RTE_IPV4(0, 0, 0, 0), 8);
	insert_random_pos(RTE_IPV4(10, 2, 23, 147), 32);
	insert_random_pos(RTE_IPV4(192, 168, 100, 10), 24);
	insert_random_pos(RTE_IPV4(192, 168, 25, 100), 24);
	insert_random_pos(RTE_IPV4(192, 168, 129, 124), 32);
}

static uint64_t fnv_words(uint64_t h, const uint32_t *w, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		for (int b = 0; b < 4; b++) {
			h ^= (w[i] >> (8 * b)) & 0xff;
			h *= 0x100000001b3ULL;
		}
	}
	return h;
}

static uint64_t fnv_routes(void)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	for (uint32_t i = 0; i < n_routes; i++) {
		h = fnv_words(h, &r_ip[i], 1);
		h ^= r_depth[i];
		h *= 0x100000001b3ULL;
	}
	return h;
}

static uint64_t fnv_tables(void)
{
	uint64_t h = 0xcbf29ce484222325ULL;
	h = fnv_words(h, (const uint32_t *)lpm->tbl24, RTE_LPM_TBL24_NUM_ENTRIES);
	return fnv_words(h, (const uint32_t *)lpm->tbl8,
			 (size_t)cfg_tbl8s * RTE_LPM_TBL8_GROUP_NUM_ENTRIES);
}

static uint64_t valid24(void)
{
	uint64_t n = 0;
	for (uint32_t i = 0; i < RTE_LPM_TBL24_NUM_ENTRIES; i++)
		n += (((const uint32_t *)lpm->tbl24)[i] >> 24) & 1;
	return n;
}

static uint64_t splitmix(uint64_t *s)
{
	uint64_t z = (*s += 0x9E3779B97F4A7C15ULL);
	z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
	z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
	return z ^ (z >> 31);
}

static void cmd_create(uint32_t max_rules, uint32_t ntbl8, uint32_t stride)
{
	struct rte_lpm_config cfg = {.max_rules = max_rules, .number_tbl8s = ntbl8, .flags = 0};

	if (lpm)
		rte_lpm_free(lpm);
	lpm = rte_lpm_create("pktbuf_lpm_ref", SOCKET_ID_ANY, &cfg);
	if (lpm == NULL) {
		printf("{\"type\":\"error\",\"cmd\":\"create\",\"error\":\"rte_lpm_create: %s\"}\n",
		       rte_strerror(rte_errno));
		return;
	}
	cfg_tbl8s = ntbl8;
	n_routes = 0;
	for (uint32_t i = 0; i < n_all; i += stride) {
		r_ip[n_routes] = all_ip[i];
		r_depth[n_routes++] = all_depth[i];
	}
	printf("{\"type\":\"create\",\"routes\":%u,\"all_routes\":%u,\"routes_fnv\":%" PRIu64
	       ",\"reserved_bytes\":%" PRIu64 "}\n", n_routes, n_all, fnv_routes(),
	       (uint64_t)(sizeof(lpm->tbl24) + 8ull * max_rules + 1024ull * ntbl8));
}

static void cmd_add_delete(int add)
{
	uint64_t ok = 0, einval = 0, enospc = 0, other = 0, t0, t1;

	t0 = tsc_begin();
	for (uint32_t i = 0; i < n_routes; i++) {
		int r = add ? rte_lpm_add(lpm, r_ip[i], r_depth[i], i & 0xffffff)
			    : rte_lpm_delete(lpm, r_ip[i], r_depth[i]);
		ok += r == 0;
		einval += r == -EINVAL;
		enospc += r == -ENOSPC;
		other += r != 0 && r != -EINVAL && r != -ENOSPC;
	}
	t1 = tsc_end();
	printf("{\"type\":\"%s\",\"cycles\":%" PRIu64 ",\"n\":%u,\"ok\":%" PRIu64 ",\"einval\":%"
	       PRIu64 ",\"enospc\":%" PRIu64 ",\"other\":%" PRIu64 ",\"valid24\":%" PRIu64
	       ",\"tables_fnv\":%" PRIu64 "}\n", add ? "add" : "delete", t1 - t0, n_routes, ok,
	       einval, enospc, other, valid24(), fnv_tables());
}

static void cmd_lookup(const char *kind, uint32_t nbatch, uint64_t seed)
{
	static uint32_t ips[BATCH], hops[BATCH];
	uint64_t s = seed, cyc = 0, check = 0, miss = 0;
	int k = strcmp(kind, "single") == 0 ? 0 : strcmp(kind, "bulk") == 0 ? 1 :
		strcmp(kind, "x4") == 0 ? 2 : -1;

	if (k < 0) {
		printf("{\"type\":\"error\",\"cmd\":\"lookup\",\"error\":\"unknown kind %s\"}\n",
		       kind);
		return;
	}
	for (uint32_t b = 0; b < nbatch; b++) {
		for (int i = 0; i < BATCH; i++)
			ips[i] = (uint32_t)splitmix(&s);
		uint64_t t0 = tsc_begin();
		if (k == 0) {
			for (int i = 0; i < BATCH; i++) {
				uint32_t nh;
				if (rte_lpm_lookup(lpm, ips[i], &nh) != 0)
					nh = UINT32_MAX;
				hops[i] = nh;
			}
		} else if (k == 1) {
			for (int i = 0; i < BATCH; i += BULK)
				rte_lpm_lookup_bulk(lpm, &ips[i], &hops[i], BULK);
		} else {
			for (int i = 0; i < BATCH; i += 4) {
				xmm_t v = _mm_loadu_si128((const __m128i *)&ips[i]);
				rte_lpm_lookupx4(lpm, v, &hops[i], UINT32_MAX);
			}
		}
		cyc += tsc_end() - t0;
		for (int i = 0; i < BATCH; i++) {
			check = check * 1099511628211ULL + hops[i];
			miss += k == 1 ? !(hops[i] & RTE_LPM_LOOKUP_SUCCESS) : hops[i] == UINT32_MAX;
		}
	}
	printf("{\"type\":\"lookup\",\"kind\":\"%s\",\"cycles\":%" PRIu64 ",\"n\":%" PRIu64
	       ",\"misses\":%" PRIu64 ",\"check\":%" PRIu64 "}\n", kind, cyc,
	       (uint64_t)nbatch * BATCH, miss, check);
}

static void cmd_dump(const char *path)
{
	FILE *f;
	size_t n8 = (size_t)cfg_tbl8s * RTE_LPM_TBL8_GROUP_NUM_ENTRIES;

	if (lpm == NULL || (f = fopen(path, "wb")) == NULL) {
		printf("{\"type\":\"error\",\"cmd\":\"dump\",\"error\":\"%s\"}\n",
		       lpm == NULL ? "no table" : strerror(errno));
		return;
	}
	int ok = fwrite(lpm->tbl24, 4, RTE_LPM_TBL24_NUM_ENTRIES, f) == RTE_LPM_TBL24_NUM_ENTRIES
		 && fwrite(lpm->tbl8, 4, n8, f) == n8;
	ok = fclose(f) == 0 && ok;
	printf("{\"type\":\"dump\",\"ok\":%s}\n", ok ? "true" : "false");
}

int main(int argc, char **argv)
{
	char line[256], a[32], path[201];
	uint64_t x, y, z;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (rte_eal_init(argc, argv) < 0) {
		fprintf(stderr, "rte_eal_init failed: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	r_ip = malloc(sizeof(*r_ip) * MAX_ROUTES);
	r_depth = malloc(MAX_ROUTES);
	generate();
	printf("{\"type\":\"ready\"}\n");
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "info", 4) == 0) {
			printf("{\"type\":\"info\",\"dpdk\":\"%s\",\"tsc_hz\":%" PRIu64 "}\n",
			       rte_version(), rte_get_tsc_hz());
		} else if (sscanf(line, "create %" SCNu64 " %" SCNu64 " %" SCNu64, &x, &y, &z) == 3) {
			cmd_create((uint32_t)x, (uint32_t)y, z ? (uint32_t)z : 1);
		} else if (strncmp(line, "add", 3) == 0 || strncmp(line, "delete", 6) == 0) {
			if (lpm == NULL)
				printf("{\"type\":\"error\",\"cmd\":\"add\",\"error\":\"no table\"}\n");
			else
				cmd_add_delete(line[0] == 'a');
		} else if (sscanf(line, "lookup %31s %" SCNu64 " %" SCNu64, a, &x, &y) == 3) {
			if (lpm == NULL)
				printf("{\"type\":\"error\",\"cmd\":\"lookup\",\"error\":\"no table\"}\n");
			else
				cmd_lookup(a, (uint32_t)x, y);
		} else if (sscanf(line, "dump %200s", path) == 1) {
			cmd_dump(path);
		} else if (strncmp(line, "quit", 4) == 0) {
			break;
		} else {
			printf("{\"type\":\"error\",\"cmd\":\"?\",\"error\":\"unknown command\"}\n");
		}
	}
	if (lpm)
		rte_lpm_free(lpm);
	rte_eal_cleanup();
	return 0;
}
