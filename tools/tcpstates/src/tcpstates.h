// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by tcpstates.bpf.c and lib.rs (through the skeleton's generated `types`). */
#ifndef __TCPSTATES_H
#define __TCPSTATES_H

#define TASK_COMM_LEN 16
/* Most ports -L or -D may list (each list is a hash map of this size). */
#define MAX_PORTS 1024
/* Most sockets whose last state change is remembered at once. */
#define MAX_SOCKETS 16384

/* One TCP state change. Addresses are in network order, IPv4 in the first 4 bytes. */
struct event {
	__u64 ts_ns;		/* bpf_ktime_get_ns() at the change */
	__u64 skaddr;		/* the socket's kernel address, which tells interleaved sessions apart */
	__u64 span_ns;		/* time in the old state: since the socket's previous change seen, else 0 */
	__u32 pid;		/* the task current at the change (BCC's C-PID) */
	__u16 family;		/* AF_INET or AF_INET6 */
	__u16 lport;
	__u16 rport;
	__u8 oldstate;
	__u8 newstate;
	__u32 _pad;
	__u8 saddr[16];
	__u8 daddr[16];
	char comm[TASK_COMM_LEN];
};

#endif
