/*
 * ptype_ref.c -- the DPDK side of `pktbuf.bench.net_ptype`, and an oracle for the tests:
 * DPDK 22.11's rte_net_get_ptype, rte_get_ptype_name, rte_raw_cksum_mbuf and rte_ipv4_cksum
 * on real rte_mbufs.
 *
 * Built on demand by pktbuf/bench/dpdk_ref.py (-O3, pkg-config libdpdk) and driven over a pipe
 * like dpdk_ref.c: one command per line on stdin, one JSON object per line on stdout.
 *
 *   info                         DPDK version, TSC rate, empty-pair cost
 *   ptype LAYERS SPLIT HEX       classify one frame (HEX) held in segments of the lengths
 *                                SPLIT ("-" = one segment, else "a,b,c": the last segment
 *                                takes what is left); answers the type and the seven fields
 *                                of struct rte_net_hdr_lens, -1 for fields not written
 *   rawck OFF LEN SPLIT HEX      rte_raw_cksum_mbuf over the frame so segmented
 *   name PTYPE                   rte_get_ptype_name
 *   load HEX HEX ...             the frames of the bench burst (one mbuf each)
 *   bench NCHUNKS CHUNK DROP_CYC REPS
 *                                REPS samples; each NCHUNKS timed intervals of CHUNK bursts:
 *                                for every mbuf of the burst, rte_net_get_ptype (all layers)
 *                                stored in packet_type, l2/l3/l4_len, then rte_ipv4_cksum of
 *                                the IPv4 header at l2_len (0 = checksum right)
 *   quit
 *
 * Timing as in rss_ref.c: fenced TSC reads around each interval, an interval of DROP_CYC or
 * more dropped, the mean empty-pair cost subtracted; result in cycles per packet.
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
#include <rte_ip.h>
#include <rte_lcore.h>
#include <rte_mbuf.h>
#include <rte_mbuf_ptype.h>
#include <rte_net.h>
#include <rte_version.h>

#define MAX_LINE   (1 << 17)
#define MAX_FRAME  9000
#define MAX_SEGS   64
#define MAX_BURST  64
#define MAX_REPS   1000
#define OVH_PAIRS  10001

static struct rte_mempool *pool;
static struct rte_mbuf *burst[MAX_BURST];
static unsigned nburst;
static uint64_t pair_ovh;
static char line[MAX_LINE];

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

static void reply_error(const char *cmd, const char *what)
{
	printf("{\"type\": \"error\", \"cmd\": \"%s\", \"error\": \"%s\"}\n", cmd, what);
	fflush(stdout);
}

/* hex text -> bytes; the length, or -1 */
static int unhex(const char *s, uint8_t *out, int cap)
{
	int n = 0;

	while (s[0] && s[0] != ' ') {
		unsigned v;

		if (!s[1] || n >= cap || sscanf(s, "%2x", &v) != 1)
			return -1;
		out[n++] = (uint8_t)v;
		s += 2;
	}
	return n;
}

/* a packet holding `frame`, cut into segments of the lengths in `split` */
static struct rte_mbuf *make_packet(const uint8_t *frame, int len, const char *split)
{
	int lens[MAX_SEGS], nseg = 0, done = 0;
	struct rte_mbuf *head = NULL;

	if (strcmp(split, "-") != 0) {
		const char *p = split;

		while (*p && nseg < MAX_SEGS - 1) {
			lens[nseg++] = atoi(p);
			p = strchr(p, ',');
			if (p == NULL)
				break;
			p++;
		}
	}
	for (int i = 0; i <= nseg; i++) {
		int n = i < nseg ? lens[i] : len - done;
		struct rte_mbuf *m;
		char *d;

		if (n < 0 || done + n > len)
			n = len - done;
		m = rte_pktmbuf_alloc(pool);
		if (m == NULL)
			goto fail;
		d = rte_pktmbuf_append(m, (uint16_t)n);
		if (d == NULL && n > 0) {
			rte_pktmbuf_free(m);
			goto fail;
		}
		if (n > 0)
			memcpy(d, frame + done, n);
		done += n;
		if (head == NULL)
			head = m;
		else if (rte_pktmbuf_chain(head, m) != 0) {
			rte_pktmbuf_free(m);
			goto fail;
		}
	}
	return head;
fail:
	rte_pktmbuf_free(head);
	return NULL;
}

static void cmd_ptype(const char *l)
{
	static uint8_t frame[MAX_FRAME];
	char split[512];
	uint32_t layers;
	int off = 0, n;
	struct rte_net_hdr_lens hl;
	struct rte_mbuf *m;
	uint32_t pt;

	if (sscanf(l, "ptype %" SCNi32 " %511s %n", &layers, split, &off) != 2 || off == 0) {
		reply_error("ptype", "usage: ptype LAYERS SPLIT HEX");
		return;
	}
	n = unhex(l + off, frame, MAX_FRAME);
	if (n < 0 || (m = make_packet(frame, n, split)) == NULL) {
		reply_error("ptype", "bad frame or no mbufs");
		return;
	}
	memset(&hl, 0xff, sizeof(hl));
	pt = rte_net_get_ptype(m, &hl, layers);
	printf("{\"type\": \"ptype\", \"ptype\": %" PRIu32 ", \"nb_segs\": %u, \"lens\": [%d, %d, %d, "
	       "%d, %d, %d, %d]}\n", pt, m->nb_segs,
	       hl.l2_len == 0xff ? -1 : hl.l2_len, hl.inner_l2_len == 0xff ? -1 : hl.inner_l2_len,
	       hl.l3_len == 0xffff ? -1 : hl.l3_len,
	       hl.inner_l3_len == 0xffff ? -1 : hl.inner_l3_len,
	       hl.tunnel_len == 0xffff ? -1 : hl.tunnel_len, hl.l4_len == 0xff ? -1 : hl.l4_len,
	       hl.inner_l4_len == 0xff ? -1 : hl.inner_l4_len);
	fflush(stdout);
	rte_pktmbuf_free(m);
}

static void cmd_rawck(const char *l)
{
	static uint8_t frame[MAX_FRAME];
	char split[512];
	uint32_t o, len;
	int off = 0, n, rc;
	struct rte_mbuf *m;
	uint16_t ck = 0;

	if (sscanf(l, "rawck %" SCNu32 " %" SCNu32 " %511s %n", &o, &len, split, &off) != 3 ||
	    off == 0) {
		reply_error("rawck", "usage: rawck OFF LEN SPLIT HEX");
		return;
	}
	n = unhex(l + off, frame, MAX_FRAME);
	if (n < 0 || (m = make_packet(frame, n, split)) == NULL) {
		reply_error("rawck", "bad frame or no mbufs");
		return;
	}
	rc = rte_raw_cksum_mbuf(m, o, len, &ck);
	printf("{\"type\": \"rawck\", \"rc\": %d, \"cksum\": %u}\n", rc, ck);
	fflush(stdout);
	rte_pktmbuf_free(m);
}

static void cmd_name(const char *l)
{
	char buf[512];
	uint32_t pt;

	if (sscanf(l, "name %" SCNi32, &pt) != 1 || rte_get_ptype_name(pt, buf, sizeof(buf)) < 0) {
		reply_error("name", "usage: name PTYPE");
		return;
	}
	printf("{\"type\": \"name\", \"name\": \"%s\"}\n", buf);
	fflush(stdout);
}

static void cmd_load(const char *l)
{
	static uint8_t frame[MAX_FRAME];
	const char *p = l + 4;

	for (unsigned i = 0; i < nburst; i++)
		rte_pktmbuf_free(burst[i]);
	nburst = 0;
	while (*p == ' ')
		p++;
	while (*p && nburst < MAX_BURST) {
		int n = unhex(p, frame, MAX_FRAME);

		if (n < 0 || (burst[nburst] = make_packet(frame, n, "-")) == NULL) {
			reply_error("load", "bad frame or no mbufs");
			return;
		}
		nburst++;
		p += 2 * n;
		while (*p == ' ')
			p++;
	}
	printf("{\"type\": \"load\", \"n\": %u}\n", nburst);
	fflush(stdout);
}

/* the measured work: one burst */
static inline uint64_t classify_burst(uint64_t *good)
{
	uint64_t sink = 0;

	for (unsigned i = 0; i < nburst; i++) {
		struct rte_mbuf *m = burst[i];
		struct rte_net_hdr_lens hl;
		uint32_t pt = rte_net_get_ptype(m, &hl, RTE_PTYPE_ALL_MASK);

		m->packet_type = pt;
		m->l2_len = hl.l2_len;
		m->l3_len = hl.l3_len;
		m->l4_len = hl.l4_len;
		if (RTE_ETH_IS_IPV4_HDR(pt)) {
			const struct rte_ipv4_hdr *ip =
				rte_pktmbuf_mtod_offset(m, const struct rte_ipv4_hdr *, m->l2_len);
			uint16_t ck = rte_ipv4_cksum(ip);

			*good += ck == 0;
			sink += ck;
		}
		sink += pt;
	}
	return sink;
}

static void cmd_bench(const char *l)
{
	uint64_t nchunks, chunk, drop_cyc, kept = 0, dropped = 0, good = 0, sink = 0;
	unsigned reps;
	double v[MAX_REPS];
	uint64_t check;

	if (sscanf(l, "bench %" SCNu64 " %" SCNu64 " %" SCNu64 " %u", &nchunks, &chunk, &drop_cyc,
		   &reps) != 4 || nchunks < 1 || chunk < 1 || reps < 1 || reps > MAX_REPS ||
	    nburst == 0) {
		reply_error("bench", "usage: bench NCHUNKS CHUNK DROP_CYC REPS (after load)");
		return;
	}
	good = 0;
	check = classify_burst(&good);       /* one burst: its sink and good count */
	printf("{\"type\": \"bench\", \"n\": %u, \"check\": %" PRIu64 ", \"good\": %" PRIu64, nburst,
	       check, good);
	for (unsigned rep = 0; rep < reps; rep++) {
		uint64_t acc = 0, k = 0, d = 0;

		for (uint64_t c = 0; c < nchunks; c++) {
			uint64_t t0 = tsc_begin();

			for (uint64_t it = 0; it < chunk; it++)
				sink += classify_burst(&good);
			uint64_t dt = tsc_end() - t0;

			if (dt < drop_cyc) {
				acc += dt;
				k++;
			} else {
				d++;
			}
		}
		if (k == 0) {
			printf("}\n");
			reply_error("bench", "every interval was dropped (preempted)");
			return;
		}
		v[rep] = ((double)acc - (double)k * (double)pair_ovh) / ((double)k * chunk * nburst);
		kept += k;
		dropped += d;
	}
	printf(", \"sink\": %" PRIu64 ", \"samples_cyc\": [", sink);
	for (unsigned i = 0; i < reps; i++)
		printf(i ? ", %.4f" : "%.4f", v[i]);
	printf("], \"kept\": %" PRIu64 ", \"dropped\": %" PRIu64 "}\n", kept, dropped);
	fflush(stdout);
}

static void cmd_info(int eal_argc, char **argv)
{
	printf("{\"type\": \"info\", \"dpdk\": \"%s\", \"tsc_hz\": %" PRIu64
	       ", \"tsc_pair_cyc\": %" PRIu64 ", \"eal_args\": [",
	       rte_version(), rte_get_tsc_hz(), pair_ovh);
	for (int i = 1; i < eal_argc; i++)
		printf(i > 1 ? ", \"%s\"" : "\"%s\"", argv[i]);
	printf("]}\n");
	fflush(stdout);
}

int main(int argc, char **argv)
{
	int eal_argc = argc;

	for (int i = 1; i < argc; i++)
		if (strcmp(argv[i], "--") == 0) {
			eal_argc = i;
			break;
		}
	if (rte_eal_init(argc, argv) < 0) {
		fprintf(stderr, "ptype_ref: rte_eal_init failed: %s\n", rte_strerror(rte_errno));
		return 1;
	}
	pool = rte_pktmbuf_pool_create("ptype_ref", 4095, 0, 0, RTE_MBUF_DEFAULT_BUF_SIZE,
				       SOCKET_ID_ANY);
	if (pool == NULL) {
		fprintf(stderr, "ptype_ref: no mbuf pool: %s\n", rte_strerror(rte_errno));
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
			cmd_info(eal_argc, argv);
		else if (strncmp(line, "ptype ", 6) == 0)
			cmd_ptype(line);
		else if (strncmp(line, "rawck ", 6) == 0)
			cmd_rawck(line);
		else if (strncmp(line, "name ", 5) == 0)
			cmd_name(line);
		else if (strncmp(line, "load ", 5) == 0)
			cmd_load(line);
		else if (strncmp(line, "bench ", 6) == 0)
			cmd_bench(line);
		else
			reply_error("?", "unknown command");
	}
	for (unsigned i = 0; i < nburst; i++)
		rte_pktmbuf_free(burst[i]);
	rte_mempool_free(pool);
	rte_eal_cleanup();
	return 0;
}
