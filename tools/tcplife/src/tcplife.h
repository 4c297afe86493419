// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by tcplife.bpf.c and main.rs (through the skeleton's generated `types`). */
#ifndef __TCPLIFE_H
#define __TCPLIFE_H

#define TASK_COMM_LEN 16
/* Most ports -L or -D may list (each list is a hash map of this size). */
#define MAX_PORTS 1024

/* What tcplife keeps per socket from its birth (the last state before FIN_WAIT1, as BCC) to its close. */
struct birth {
	__u64 ts_ns;		/* bpf_ktime_get_ns() at the last state change before FIN_WAIT1 */
	__u64 acked_base;	/* bytes_acked when ESTABLISHED was reached: the active opener's SYN */
	__u8 fin_sent;		/* FIN_WAIT1 or LAST_ACK reached: this end queued a FIN */
	__u8 client;		/* born at SYN_SENT: this end connected (else it was accepted) */
	__u8 _pad[6];
};

/* --prometheus: instead of a record per session, histograms per service (the listener's port, and whether this
 * end is its server or a client of it), as the slots of hist.h: durations in microsecond slots (sum in ns), payload
 * bytes in byte slots (sum in bytes). 2^36 us is 19 hours and 2^36 bytes 64 GiB; longer or larger sessions go
 * to the last slot, which is exported as +Inf. */
#define MAX_SLOTS 36
#define MAX_SERVICES 1024
#include "hist.h"

struct service_key {
	__u16 port;		/* the server's port: lport of an accepted session, rport of a connected one */
	__u16 family;		/* AF_INET or AF_INET6 */
	__u8 client;		/* 1: this end connected to the port; 0: it is the listener's side */
	__u8 _pad[3];
};

struct service_hists {
	struct hist span;	/* sum_ns: nanoseconds */
	struct hist rx;		/* sum_ns: payload bytes received */
	struct hist tx;		/* sum_ns: payload bytes acked by the peer */
};

/* One closed TCP session. Addresses are in network order, IPv4 in the first 4 bytes. */
struct event {
	__u64 ts_ns;		/* bpf_ktime_get_ns() at close */
	__u64 span_ns;		/* from the last state before FIN_WAIT1 (as BCC) to close */
	__u64 rx_b;		/* tcp_sock->bytes_received (BCC's RX_KB; counts a received FIN) */
	__u64 tx_b;		/* tcp_sock->bytes_acked (BCC's TX_KB; counts an acked SYN and FIN) */
	__u64 rx_payload;	/* payload bytes received: rx_b less the peer's FIN */
	__u64 tx_payload;	/* payload bytes acked by the peer: tx_b less this end's SYN and FIN */
	__u64 cgroup_id;	/* the owner's cgroup v2 ID (its container, if any) */
	__u32 pid;
	__u16 lport;
	__u16 rport;
	__u16 family;		/* AF_INET or AF_INET6 */
	__u16 _pad[3];
	__u8 saddr[16];
	__u8 daddr[16];
	char comm[TASK_COMM_LEN];
};

#endif
