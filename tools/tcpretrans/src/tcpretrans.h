// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by tcpretrans.bpf.c and the Rust side (through the skeleton's generated `types`). */
#ifndef __TCPRETRANS_H
#define __TCPRETRANS_H

/* Flows -c counts (the size of its hash map; 1 entry without -c). */
#define MAX_FLOWS 10240

/* BCC's event types: the T column's R and L. */
#define RETRANSMIT 1
#define TLP 2

/* One retransmit. Addresses are in network order (IPv4 in the first 4 bytes), ports in host order. */
struct event {
	__u32 pid;		/* the task on CPU at the retransmit (often 0: the timer's softirq) */
	__u32 seq;		/* the retransmitted segment's first sequence number */
	__u16 family;		/* AF_INET or AF_INET6 */
	__u16 lport;
	__u16 rport;
	__u8 state;		/* the socket's TCP state */
	__u8 type;		/* RETRANSMIT or TLP */
	__u8 saddr[16];
	__u8 daddr[16];
};

/* -c: retransmits counted per flow. */
struct flow {
	__u16 family;
	__u16 lport;
	__u16 rport;
	__u16 _pad;
	__u8 saddr[16];
	__u8 daddr[16];
};

#endif
