// SPDX-License-Identifier: Apache-2.0 OR MIT
//! TCP states and header flags as BCC's tools print them (`bcc/tcp.py`: `state2str`, `flags2str`).

/// The name of TCP state `state` (include/net/tcp_states.h), or its number when unknown, as BCC's `state2str`.
pub fn state_name(state: u8) -> String {
    const NAMES: [&str; 12] = [
        "ESTABLISHED",
        "SYN_SENT",
        "SYN_RECV",
        "FIN_WAIT1",
        "FIN_WAIT2",
        "TIME_WAIT",
        "CLOSE",
        "CLOSE_WAIT",
        "LAST_ACK",
        "LISTEN",
        "CLOSING",
        "NEW_SYN_RECV",
    ];
    match state {
        1..=12 => NAMES[state as usize - 1].to_string(),
        _ => state.to_string(),
    }
}

/// The TCP header's flags byte as `SYN|ACK`, in BCC's `flags2str` order.
pub fn flags_str(flags: u8) -> String {
    const NAMES: [&str; 8] = ["FIN", "SYN", "RST", "PSH", "ACK", "URG", "ECE", "CWR"];
    NAMES.iter().enumerate().filter(|(bit, _)| flags & (1 << bit) != 0).map(|(_, n)| *n).collect::<Vec<_>>().join("|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn as_bcc() {
        assert_eq!(state_name(1), "ESTABLISHED");
        assert_eq!(state_name(12), "NEW_SYN_RECV");
        assert_eq!(state_name(0), "0");
        assert_eq!(flags_str(0x12), "SYN|ACK");
        assert_eq!(flags_str(0x02), "SYN");
        assert_eq!(flags_str(0), "");
    }
}
