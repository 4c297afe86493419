// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* tcprtt: a log2 histogram of TCP's smoothed round-trip time (srtt), sampled each time an established socket
 * processes a received segment.
 *
 * BCC and libbpf-tools hook tcp_rcv_established() (kprobe, fentry). The tcp:tcp_probe tracepoint is called at the
 * start of that function, with the same socket, so tp_btf/raw_tp see the same calls at the same point (before
 * this segment's RTT sample updates srtt); fentry and kprobe on the function stay in the ladder. The socket's
 * srtt_us holds 8 times the smoothed RTT in microseconds. Filters (-p/-P ports, -a/-A addresses, -4/-6) are
 * constants set before load; histograms are cumulative and never deleted (user space prints differences). */
#include <vmlinux.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include "bits.bpf.h"
#include "maps.bpf.h"
#include "sock.bpf.h"
#include "tp_btf_raw.bpf.h"
#include "tcprtt.h"

const volatile __u16 target_lport = 0;
const volatile __u16 target_rport = 0;
/* -a / -A: an address to match (its family non-zero) in the 16-byte form of sk_addrs(). */
const volatile __u16 laddr_family = 0;
const volatile __u8 target_laddr[16] = {};
const volatile __u16 raddr_family = 0;
const volatile __u8 target_raddr[16] = {};
/* -4 / -6 */
const volatile __u16 target_family = 0;
const volatile __u32 by = BY_NONE;
const volatile bool millis = false;

/* Segments not counted because `hists` was full. */
__u64 hists_full = 0;

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 1);
	__type(key, struct hist_key);
	__type(value, struct hist);
} hists SEC(".maps");

static const struct hist empty_hist;

/* Makes the key type visible to the skeleton's generated `types` module. */
struct hist_key _hist_key_type = {};

/* The `len` bytes at `a` equal those of the constant `b` (a loop, so that the volatile constant is read at run
 * time, not folded). */
static __always_inline bool same_addr(const __u8 *a, const volatile __u8 *b, int len)
{
	for (int i = 0; i < 16; i++) {
		if (i >= len)
			break;
		if (a[i] != b[i])
			return false;
	}
	return true;
}

static __always_inline bool addr_wanted(__u16 family, const __u8 *addr, __u16 want_family,
					const volatile __u8 *want)
{
	if (!want_family)
		return true;
	return family == want_family && same_addr(addr, want, family == AF_INET ? 4 : 16);
}

static __always_inline int count_rtt(struct sock *sk)
{
	struct hist_key key = {};
	__u8 saddr[16] = {}, daddr[16] = {};
	struct hist *hist;
	__u16 family;
	__u64 srtt, slot;

	family = sk_inet_family(sk, target_family);
	if (!family)
		return 0;
	if (target_lport && sk_lport(sk) != target_lport)
		return 0;
	if (target_rport && sk_rport(sk) != target_rport)
		return 0;
	sk_addrs(sk, family, saddr, daddr);
	if (!addr_wanted(family, saddr, laddr_family, target_laddr) ||
	    !addr_wanted(family, daddr, raddr_family, target_raddr))
		return 0;

	if (by == BY_LADDR)
		__builtin_memcpy(key.addr, saddr, sizeof(key.addr));
	else if (by == BY_RADDR)
		__builtin_memcpy(key.addr, daddr, sizeof(key.addr));
	if (by != BY_NONE)
		key.family = family;

	srtt = BPF_CORE_READ((struct tcp_sock *)sk, srtt_us) >> 3;
	if (millis)
		srtt /= 1000;
	hist = bpf_map_lookup_or_try_init(&hists, &key, &empty_hist);
	if (!hist) {
		__sync_fetch_and_add(&hists_full, 1);
		return 0;
	}
	slot = log2l(srtt);
	if (slot >= MAX_SLOTS)
		slot = MAX_SLOTS - 1;
	__sync_fetch_and_add(&hist->slots[slot], 1);
	__sync_fetch_and_add(&hist->count, 1);
	__sync_fetch_and_add(&hist->sum_ns, srtt);
	return 0;
}

TP_BTF_RAW(tcp_probe, tcp_probe, struct sock *sk, struct sk_buff *skb)
{
	return count_rtt(sk);
}

SEC("fentry/tcp_rcv_established")
int BPF_PROG(tcp_rcv_fentry, struct sock *sk)
{
	return count_rtt(sk);
}

SEC("kprobe/tcp_rcv_established")
int BPF_KPROBE(tcp_rcv_kprobe, struct sock *sk)
{
	return count_rtt(sk);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
