// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* What tcppktlat.bpf.c and the Rust side share: every `#define NAME <integer>` here reaches Rust as
 * bpf::consts::NAME, and struct event as bpf::types::event. */
#ifndef __TCPPKTLAT_H
#define __TCPPKTLAT_H

#define TASK_COMM_LEN 16
/* Most sockets holding received data not yet read, timed at once. */
#define MAX_SOCKETS 16384

/* One pick-up: a task read data from a socket. Addresses are in network order, IPv4 in the first 4 bytes;
 * ports in host order. */
struct event {
	__u64 delta_ns;		/* from the last data segment's arrival to the read that took it */
	__u32 pid;		/* the reading task's process (TGID) */
	__u32 tid;		/* the reading thread */
	__u16 family;		/* AF_INET or AF_INET6 */
	__u16 lport;
	__u16 rport;
	__u16 _pad;
	__u8 saddr[16];
	__u8 daddr[16];
	char comm[TASK_COMM_LEN];
};

#endif
