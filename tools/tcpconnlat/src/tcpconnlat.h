// SPDX-License-Identifier: GPL-2.0-only OR BSD-2-Clause
/* Types shared by tcpconnlat.bpf.c and lib.rs (through the skeleton's generated `types`). */
#ifndef __TCPCONNLAT_H
#define __TCPCONNLAT_H

#define TASK_COMM_LEN 16
/* Most connects in progress (SYN sent, no answer yet) tracked at once. */
#define MAX_SOCKETS 16384

/* One active open that reached ESTABLISHED. Addresses are in network order, IPv4 in the first 4 bytes. */
struct event {
	__u64 ts_ns;		/* bpf_ktime_get_ns() at ESTABLISHED */
	__u64 lat_ns;		/* from CLOSE -> SYN_SENT (in connect()) to SYN_SENT -> ESTABLISHED */
	__u32 pid;		/* the connecting task's process */
	__u16 family;		/* AF_INET or AF_INET6 */
	__u16 lport;
	__u16 rport;
	__u16 _pad[3];
	__u8 saddr[16];
	__u8 daddr[16];
	char comm[TASK_COMM_LEN];
};

#endif
