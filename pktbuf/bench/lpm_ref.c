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
 *   create6 MAX_RULES NTBL8 PATH  IPv6: an rte_lpm6 table and the rules of PATH (pktbuf's
 *                                 lpm6_routes.txt: hex address, depth, next hop per line)
 *   add6 / delete6                add / delete every rule in order (next hop = the rule's);
 *                                 cycles in total and return-code counts
 *   lookup6 KIND NITER SEED       lpm6_perf_autotest's addresses (below) from SEED, then NITER
 *                                 timed passes over all of them (KIND single: rte_lpm6_lookup
 *                                 each, counting failures, as lpm6_perf; bulk: one
 *                                 rte_lpm6_lookup_bulk_func over all); then one untimed pass
 *                                 whose next hops (-1 for a miss) make the check value
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
#include <rte_lpm6.h>
#include <rte_version.h>

#define BATCH      4096
#define BULK       32
#define MAX_ROUTES (1 << 21)
#define MAX_ROUTES6 4096
#define IPS_PER_ROUTE6 100     /* lpm6_perf: NUM_IPS_ENTRIES = 100 x the rules */

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

/* One function per kind, as pktbuf's bench has one compiled loop per kind; each times its
 * batch of BATCH lookups. */
static __rte_noinline uint64_t time_single(const uint32_t *ips, uint32_t *hops)
{
	uint64_t t0 = tsc_begin();

	for (int i = 0; i < BATCH; i++) {
		uint32_t nh;
		if (rte_lpm_lookup(lpm, ips[i], &nh) != 0)
			nh = UINT32_MAX;
		hops[i] = nh;
	}
	return tsc_end() - t0;
}

static __rte_noinline uint64_t time_bulk(const uint32_t *ips, uint32_t *hops)
{
	uint64_t t0 = tsc_begin();

	for (int i = 0; i < BATCH; i += BULK)
		rte_lpm_lookup_bulk(lpm, &ips[i], &hops[i], BULK);
	return tsc_end() - t0;
}

static __rte_noinline uint64_t time_x4(const uint32_t *ips, uint32_t *hops)
{
	uint64_t t0 = tsc_begin();

	for (int i = 0; i < BATCH; i += 4) {
		xmm_t v = _mm_loadu_si128((const __m128i *)&ips[i]);
		rte_lpm_lookupx4(lpm, v, &hops[i], UINT32_MAX);
	}
	return tsc_end() - t0;
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
		cyc += k == 0 ? time_single(ips, hops) : k == 1 ? time_bulk(ips, hops)
						     : time_x4(ips, hops);
		for (int i = 0; i < BATCH; i++) {
			check = check * 1099511628211ULL + hops[i];
			miss += k == 1 ? !(hops[i] & RTE_LPM_LOOKUP_SUCCESS) : hops[i] == UINT32_MAX;
		}
	}
	printf("{\"type\":\"lookup\",\"kind\":\"%s\",\"cycles\":%" PRIu64 ",\"n\":%" PRIu64
	       ",\"misses\":%" PRIu64 ",\"check\":%" PRIu64 "}\n", kind, cyc,
	       (uint64_t)nbatch * BATCH, miss, check);
}

/* --- IPv6: rte_lpm6 over lpm6_perf_autotest's rules ------------------------------------- */

static struct rte_lpm6 *lpm6;
static uint8_t r6_ip[MAX_ROUTES6][16], r6_depth[MAX_ROUTES6];
static uint32_t r6_nh[MAX_ROUTES6], n6;
static uint8_t (*ips6)[16];
static int32_t *hops6;

static void cmd_create6(uint32_t max_rules, uint32_t ntbl8, const char *path)
{
	struct rte_lpm6_config cfg = {.max_rules = max_rules, .number_tbl8s = ntbl8, .flags = 0};
	char line[256];
	FILE *f = fopen(path, "r");
	uint64_t h = 0xcbf29ce484222325ULL;

	if (f == NULL) {
		printf("{\"type\":\"error\",\"cmd\":\"create6\",\"error\":\"%s\"}\n", strerror(errno));
		return;
	}
	n6 = 0;
	while (fgets(line, sizeof(line), f)) {
		char hex[33];
		unsigned int d, nh;
		if (line[0] == '#')
			continue;
		if (sscanf(line, "%32s %u %u", hex, &d, &nh) != 3 || strlen(hex) != 32 || d < 1 ||
		    d > 128 || n6 == MAX_ROUTES6) {
			fclose(f);
			printf("{\"type\":\"error\",\"cmd\":\"create6\",\"error\":\"bad rule %u\"}\n",
			       n6);
			return;
		}
		for (int k = 0; k < 16; k++) {
			unsigned int b;
			if (sscanf(hex + 2 * k, "%2x", &b) != 1) {
				fclose(f);
				printf("{\"type\":\"error\",\"cmd\":\"create6\",\"error\":\"bad address\"}\n");
				return;
			}
			r6_ip[n6][k] = (uint8_t)b;
			h = (h ^ b) * 0x100000001b3ULL;
		}
		r6_depth[n6] = (uint8_t)d;
		r6_nh[n6++] = nh;
		h = (h ^ d) * 0x100000001b3ULL;
		h = (h ^ (nh & 0xff)) * 0x100000001b3ULL;
	}
	fclose(f);
	if (lpm6)
		rte_lpm6_free(lpm6);
	lpm6 = rte_lpm6_create("pktbuf_lpm6_ref", SOCKET_ID_ANY, &cfg);
	if (lpm6 == NULL) {
		printf("{\"type\":\"error\",\"cmd\":\"create6\",\"error\":\"rte_lpm6_create: %s\"}\n",
		       rte_strerror(rte_errno));
		return;
	}
	printf("{\"type\":\"create6\",\"routes\":%u,\"routes_fnv\":%" PRIu64 "}\n", n6, h);
}

static void cmd_add_delete6(int add)
{
	uint64_t ok = 0, einval = 0, enospc = 0, enoent = 0, t0, t1;

	t0 = tsc_begin();
	for (uint32_t i = 0; i < n6; i++) {
		int r = add ? rte_lpm6_add(lpm6, r6_ip[i], r6_depth[i], r6_nh[i])
			    : rte_lpm6_delete(lpm6, r6_ip[i], r6_depth[i]);
		ok += r == 0;
		einval += r == -EINVAL;
		enospc += r == -ENOSPC;
		enoent += r == -ENOENT;
	}
	t1 = tsc_end();
	printf("{\"type\":\"%s\",\"cycles\":%" PRIu64 ",\"n\":%u,\"ok\":%" PRIu64 ",\"einval\":%"
	       PRIu64 ",\"enospc\":%" PRIu64 ",\"enoent\":%" PRIu64 "}\n",
	       add ? "add6" : "delete6", t1 - t0, n6, ok, einval, enospc, enoent);
}

/* lpm6_perf's generate_large_ips_table: IPS_PER_ROUTE6 addresses per rule, in rule order,
 * each random bytes with the rule's first `depth` bits copied in (mask_ip6_prefix); random
 * bytes here are splitmix64 outputs, little-endian, two per address. */
static void gen_ips6(uint64_t seed)
{
	uint64_t s = seed;

	for (uint32_t i = 0; i < n6 * IPS_PER_ROUTE6; i++) {
		uint64_t a = splitmix(&s), b = splitmix(&s);
		const uint8_t *rip = r6_ip[i / IPS_PER_ROUTE6];
		int d = r6_depth[i / IPS_PER_ROUTE6];
		memcpy(ips6[i], &a, 8);
		memcpy(ips6[i] + 8, &b, 8);
		for (int k = 0; k < 16 && d > 0; k++, d -= 8) {
			uint8_t m = d >= 8 ? 0xff : (uint8_t)(0xff << (8 - d));
			ips6[i][k] = (rip[k] & m) | (ips6[i][k] & (uint8_t)~m);
		}
	}
}

static __rte_noinline uint64_t time_single6(uint32_t n, uint64_t *fails)
{
	uint32_t nh;
	uint64_t t0 = tsc_begin();

	for (uint32_t j = 0; j < n; j++)
		if (rte_lpm6_lookup(lpm6, ips6[j], &nh) != 0)
			(*fails)++;
	return tsc_end() - t0;
}

static __rte_noinline uint64_t time_bulk6(uint32_t n)
{
	uint64_t t0 = tsc_begin();

	rte_lpm6_lookup_bulk_func(lpm6, ips6, hops6, n);
	return tsc_end() - t0;
}

static void cmd_lookup6(const char *kind, uint32_t niter, uint64_t seed)
{
	uint32_t n = n6 * IPS_PER_ROUTE6;
	uint64_t cyc = 0, fails = 0, check = 0, miss = 0;
	int k = strcmp(kind, "single") == 0 ? 0 : strcmp(kind, "bulk") == 0 ? 1 : -1;

	if (k < 0) {
		printf("{\"type\":\"error\",\"cmd\":\"lookup6\",\"error\":\"unknown kind %s\"}\n",
		       kind);
		return;
	}
	gen_ips6(seed);
	for (uint32_t it = 0; it < niter; it++) {
		if (k == 0) {
			cyc += time_single6(n, &fails);
		} else {
			cyc += time_bulk6(n);
			for (uint32_t j = 0; j < n; j++)
				fails += hops6[j] < 0;
		}
	}
	for (uint32_t j = 0; j < n; j++) {
		uint32_t nh;
		int32_t v = rte_lpm6_lookup(lpm6, ips6[j], &nh) == 0 ? (int32_t)nh : -1;
		check = check * 1099511628211ULL + (uint32_t)v;
		miss += v < 0;
	}
	printf("{\"type\":\"lookup6\",\"kind\":\"%s\",\"cycles\":%" PRIu64 ",\"n\":%" PRIu64
	       ",\"fails\":%" PRIu64 ",\"misses\":%" PRIu64 ",\"check\":%" PRIu64 "}\n", kind, cyc,
	       (uint64_t)niter * n, fails, miss, check);
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
	ips6 = malloc(sizeof(*ips6) * MAX_ROUTES6 * IPS_PER_ROUTE6);
	hops6 = malloc(sizeof(*hops6) * MAX_ROUTES6 * IPS_PER_ROUTE6);
	generate();
	printf("{\"type\":\"ready\"}\n");
	while (fgets(line, sizeof(line), stdin)) {
		if (strncmp(line, "info", 4) == 0) {
			printf("{\"type\":\"info\",\"dpdk\":\"%s\",\"tsc_hz\":%" PRIu64 "}\n",
			       rte_version(), rte_get_tsc_hz());
		} else if (sscanf(line, "create6 %" SCNu64 " %" SCNu64 " %200s", &x, &y, path) == 3) {
			cmd_create6((uint32_t)x, (uint32_t)y, path);
		} else if (strncmp(line, "add6", 4) == 0 || strncmp(line, "delete6", 7) == 0) {
			if (lpm6 == NULL)
				printf("{\"type\":\"error\",\"cmd\":\"add6\",\"error\":\"no table\"}\n");
			else
				cmd_add_delete6(line[0] == 'a');
		} else if (sscanf(line, "lookup6 %31s %" SCNu64 " %" SCNu64, a, &x, &y) == 3) {
			if (lpm6 == NULL)
				printf("{\"type\":\"error\",\"cmd\":\"lookup6\",\"error\":\"no table\"}\n");
			else
				cmd_lookup6(a, (uint32_t)x, y);
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
	if (lpm6)
		rte_lpm6_free(lpm6);
	rte_eal_cleanup();
	return 0;
}
