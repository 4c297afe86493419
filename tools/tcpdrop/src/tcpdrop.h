// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by tcpdrop.bpf.c and the Rust side (through the skeleton's generated `types`). */
#ifndef __TCPDROP_H
#define __TCPDROP_H

/* Most reasons --reasons may list (the size of the reason filter map). */
#define MAX_REASONS 1024
/* Distinct (reason, location) pairs -s keeps. */
#define MAX_SUMMARY 10240
/* Stacks the stack map holds. */
#define MAX_STACKS 4096

/* One dropped packet. Addresses are in network order (IPv4 in the first 4 bytes), ports in host order. */
struct event {
	__u64 ts_ns;
	__u64 location;		/* the kernel address that freed the packet (the tracepoint's location) */
	__u32 pid;		/* the task current at the drop (often unrelated: softirq) */
	__u32 reason;		/* enum skb_drop_reason; 0 when the kernel gives none (tcp_drop) */
	__s32 stack_id;		/* kernel stack in `stacks`, < 0 if lost */
	__u16 sport;
	__u16 dport;
	__u8 ipver;		/* 4 or 6 */
	__u8 protocol;		/* IPPROTO_TCP, UDP, ... of the IP header */
	__u8 state;		/* the socket's TCP state, 0 with no socket */
	__u8 tcpflags;		/* the TCP header's flags byte */
	__u8 saddr[16];
	__u8 daddr[16];
};

/* -s: drops counted per reason and kernel location. */
struct summary_key {
	__u64 location;
	__u32 reason;
	__u32 _pad;
};

#endif
