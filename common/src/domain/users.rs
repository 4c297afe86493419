// SPDX-License-Identifier: Apache-2.0 OR MIT
//! User names to UIDs from the password file. Not through glibc's `getpwnam`: the shipped binary is static, and a
//! static glibc loads NSS modules with dlopen, which crashed (SIGSEGV) on a Debian host asked for an unknown name.
//! Local users (/etc/passwd) are what tracing tools are asked about; a name only a directory service knows is
//! refused with a clear error, and its numeric UID still works.

use std::fs;

/// The UID of user `name` in the password file (`/etc/passwd`), if it has one.
pub fn uid_of(name: &str) -> Option<u32> {
    uid_in(&fs::read_to_string("/etc/passwd").ok()?, name)
}

/// The UID of `name` in the text of a password file (`name:x:uid:gid:...` lines).
fn uid_in(passwd: &str, name: &str) -> Option<u32> {
    passwd.lines().find_map(|line| {
        let mut fields = line.split(':');
        (fields.next()? == name).then_some(())?;
        fields.nth(1)?.parse().ok()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_map_to_their_uid_and_nothing_else_does() {
        let passwd = "root:x:0:0:root:/root:/bin/bash\nnobody:x:65534:65534::/:/usr/sbin/nologin\nbad:x:y:1::/:\n";
        assert_eq!(uid_in(passwd, "root"), Some(0));
        assert_eq!(uid_in(passwd, "nobody"), Some(65534));
        assert_eq!(uid_in(passwd, "bad"), None);
        assert_eq!(uid_in(passwd, "roo"), None);
        assert_eq!(uid_in(passwd, ""), None);
        assert_eq!(uid_in(passwd, "1,,2"), None);
    }
}
