/*
 * thash_vectors.c -- hashes computed by DPDK's own inline Toeplitz functions (rte_thash.h),
 * for tests/rss.  One request per line on stdin, one answer per line on stdout:
 *
 *   raw KEYHEX TUPLEHEX      the tuple (network-order bytes, a multiple of 4) as host-order
 *                            words: "softrss softrss_be" in hex
 *   v4 KEYHEX SRC DST SPORT DPORT
 *                            struct rte_ipv4_tuple filled as an application does (addresses
 *                            and ports in host order): "l3 l4" (RTE_THASH_V4_L3_LEN / _L4_LEN)
 *   v6 KEYHEX SRC32HEX DST32HEX SPORT DPORT
 *                            an rte_ipv6_hdr loaded with rte_thash_load_v6_addrs: "l3 l4"
 *
 * Hex numbers are plain (no 0x).  Bad input answers "error".
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <rte_byteorder.h>
#include <rte_ip.h>
#include <rte_thash.h>

#define MAX_KEY 256

static int unhex(const char *s, uint8_t *out, size_t max)
{
	size_t n = strlen(s);

	if (n % 2 || n / 2 > max)
		return -1;
	for (size_t i = 0; i < n / 2; i++) {
		unsigned v;
		if (sscanf(s + 2 * i, "%2x", &v) != 1)
			return -1;
		out[i] = (uint8_t)v;
	}
	return (int)(n / 2);
}

int main(void)
{
	char line[2048], kind[8], khex[2 * MAX_KEY + 1], a[129], b[129];
	uint8_t key[MAX_KEY];
	uint32_t key_be[MAX_KEY / 4];

	while (fgets(line, sizeof(line), stdin) != NULL) {
		unsigned sport = 0, dport = 0;
		int f = sscanf(line, "%7s %512s %128s %128s %x %x", kind, khex, a, b, &sport, &dport);
		int klen = f >= 2 ? unhex(khex, key, sizeof(key)) : -1;

		if (klen < 40 || klen % 4) {
			puts("error");
			continue;
		}
		rte_convert_rss_key((const uint32_t *)key, key_be, klen);
		if (strcmp(kind, "raw") == 0 && f >= 3) {
			uint8_t t[144];
			uint32_t w[36];
			int n = unhex(a, t, sizeof(t));
			if (n < 0 || n % 4 || n / 4 + 1 > klen / 4) {
				puts("error");
				continue;
			}
			for (int i = 0; i < n / 4; i++) {
				uint32_t x;
				memcpy(&x, t + 4 * i, 4);
				w[i] = rte_be_to_cpu_32(x);
			}
			printf("%08" PRIx32 " %08" PRIx32 "\n", rte_softrss(w, n / 4, key),
			       rte_softrss_be(w, n / 4, (const uint8_t *)key_be));
		} else if (strcmp(kind, "v4") == 0 && f == 6) {
			union rte_thash_tuple t;
			memset(&t, 0, sizeof(t));
			t.v4.src_addr = (uint32_t)strtoul(a, NULL, 16);
			t.v4.dst_addr = (uint32_t)strtoul(b, NULL, 16);
			t.v4.sport = (uint16_t)sport;
			t.v4.dport = (uint16_t)dport;
			printf("%08" PRIx32 " %08" PRIx32 "\n",
			       rte_softrss((uint32_t *)&t, RTE_THASH_V4_L3_LEN, key),
			       rte_softrss((uint32_t *)&t, RTE_THASH_V4_L4_LEN, key));
		} else if (strcmp(kind, "v6") == 0 && f == 6) {
			union rte_thash_tuple t;
			struct rte_ipv6_hdr ip;
			memset(&t, 0, sizeof(t));
			memset(&ip, 0, sizeof(ip));
			if (unhex(a, ip.src_addr, 16) != 16 || unhex(b, ip.dst_addr, 16) != 16) {
				puts("error");
				continue;
			}
			rte_thash_load_v6_addrs(&ip, &t);
			t.v6.sport = (uint16_t)sport;
			t.v6.dport = (uint16_t)dport;
			printf("%08" PRIx32 " %08" PRIx32 "\n",
			       rte_softrss((uint32_t *)&t, RTE_THASH_V6_L3_LEN, key),
			       rte_softrss((uint32_t *)&t, RTE_THASH_V6_L4_LEN, key));
		} else {
			puts("error");
		}
		fflush(stdout);
	}
	return 0;
}
